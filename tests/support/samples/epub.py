"""EPUB books' parts (cover, chapters) and the XML language attribute."""

from __future__ import annotations

from typing import Any

from lxml import etree  # type: ignore[import-untyped]

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


COVER = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml">
<head><title>Cover</title></head>
<body><div class="cover"><img src="images/boat.png" alt=""/></div></body>
</html>
"""


CHAPTER_1 = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"
  lang="en" xml:lang="en">
<head>
  <meta charset="utf-8"/>
  <title>The harbour at dawn</title>
  <link rel="stylesheet" type="text/css" href="../style/book.css"/>
</head>
<body epub:type="bodymatter">
  <section epub:type="chapter" id="c1">
    <h1 epub:type="title">The harbour at dawn</h1>
    <p>The boats were <em>still</em> asleep when&#160;the fishermen came down the hill.</p>
    <p>Read the <a href="ch2.xhtml#storm">next chapter</a> to learn what happened.<br/>
    Then look at the picture <img src="../images/boat.png" alt="A small red boat"/> again.</p>
    <p class="note">Nobody spoke &amp; nobody hurried <span epub:type="pagebreak" id="p2"/>
    on that morning.</p>
    <figure>
      <svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text x="0" y="9">Wave
      drawing</text></svg>
      <figcaption>A drawing of the waves</figcaption>
    </figure>
    <a href="ch2.xhtml"><div class="teaser"><p>Continue with the storm</p></div> and more
    words after it</a>
  </section>
</body>
</html>
"""


def xml_tree(content: bytes) -> Any:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    return etree.fromstring(content, parser)
