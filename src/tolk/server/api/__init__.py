"""The server's APIs, one module each (router, and its parameters and answers): tolk's own
(`tolk`), the drop-in DeepL v2 (`/v2/...`, `deepl`) and LibreTranslate (at the server's root,
`libretranslate`), and the web page (`web`).

Each drop-in is a thin adapter over tolk's one translation service (tolk.translation.Translator):
it reads parameters where its clients send them, maps language codes and options, and
shapes answers and errors as its clients parse them. Fan-out, limits, admission, deadlines,
keys and quotas are the service's and tolk.server.access's, whatever the wire format.
What the clients send and expect: README, "Drop-in: DeepL and LibreTranslate clients".
"""
