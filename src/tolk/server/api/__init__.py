"""The server's APIs, one module each (router, and its parameters and answers): tolk's own
(`tolk`), the drop-in DeepL v2 (`/v2/...`, `deepl`) and LibreTranslate (at the server's root,
`libretranslate`), and the web page (`web`).

Each drop-in is a thin adapter over tolk's one translation service (tolk.translation.Translator),
and every handler reads as parse -> gateway -> shape: it reads its request where its clients
send it (a model of the API's own, `deepl_bodies` and `libretranslate_bodies`, validated
with the API's messages), maps language codes and options into a TranslationRequest, hands
it to a verb of the gateway (tolk.server.gateway: callers, draining, admission, deadlines,
quotas, metrics), and shapes the answer and errors as its clients parse them. Fan-out and
limits are the service's, whatever the wire format.
What the clients send and expect: README, "Drop-in: DeepL and LibreTranslate clients".
"""
