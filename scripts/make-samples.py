"""Write src/tolk/data/samples/: one small file of each kind tolk translates, made by the
library that writes that kind (python-docx, python-pptx, openpyxl, odfpy, polib, reportlab)
or, for the text and XML formats, as the apps that make them write them. Their English is the
case study's (src/tolk/data/case_study/part1.en.txt). `tolk bench documents` times each one
(its "files" measurement) and docs/samples/ holds the real model's translations of them.

    .venv/bin/python scripts/make-samples.py      # rewrite src/tolk/data/samples/

odfpy and reportlab are test dependencies (the `dev` extra): the samples are made once and
shipped, so a server never needs them. The archives' members are dated alike, so running this
again changes only what the libraries stamp inside (openpyxl writes the save time).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "tolk" / "data" / "samples"
WHEN = dt.datetime(2026, 11, 26, 12, 0, 0)

TITLE = "Where the GPU waits"
PARAGRAPHS = [
    "We run a translation microservice using FastAPI and vLLM. Under heavy load, we hit "
    "server latency issues that did not match what our GPU utilization metrics suggested.",
    "GPU utilization showed a stuttering pattern: spike to 93%, drop to 0%, spike again. "
    "Not the consistent high utilization we expected.",
    "The question: if the GPU has idle periods, where is the bottleneck?",
    "This article covers how we identified the architectural issues in our setup that were "
    "preventing efficient GPU utilization.",
]
POINTS = [
    "Clients: web, mobile and backend services",
    "Proxy: routes requests based on language pairs and server health",
    "API servers: several FastAPI instances, each running vLLM",
]
CELLS = [("Step", "Requests per second", "Note"), ("Baseline", 12.5, "One worker process")]
CELLS += [("Batching", 48.0, "Continuous batching in the engine")]


def _fixed_zip(data: bytes) -> bytes:
    """The same archive with every member dated WHEN (libraries stamp the current time)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, WHEN.timetuple()[:6])
            fixed.compress_type = info.compress_type
            fixed.external_attr = info.external_attr
            dst.writestr(fixed, src.read(info))
    return out.getvalue()


def markdown() -> str:
    lines = [f"# {TITLE}", "", PARAGRAPHS[0], "", "## The problem", ""]
    lines += [PARAGRAPHS[1].replace("stuttering", "**stuttering**"), "", PARAGRAPHS[2], ""]
    lines += [f"- {p}" for p in POINTS] + ["", "```python", "await llm.generate(prompt)", "```"]
    return "\n".join(lines) + "\n"


def html() -> str:
    items = "".join(f"<li>{p}</li>" for p in POINTS)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
        f"<title>{TITLE}</title></head>\n<body>\n<h1>{TITLE}</h1>\n<p>{PARAGRAPHS[0]}</p>\n"
        f"<p>{PARAGRAPHS[1].replace('stuttering', '<em>stuttering</em>')}</p>\n"
        f'<p>{PARAGRAPHS[2]} <a href="https://example.com/part2">Read on</a>.</p>\n'
        f"<ul>{items}</ul>\n</body>\n</html>\n"
    )


def subtitles() -> str:
    cues = [
        "We run a translation microservice",
        "using FastAPI and vLLM.",
        "Under heavy load, we hit latency issues",
        "that did not match our GPU metrics.",
        "Where is the bottleneck?",
    ]
    out = []
    for i, text in enumerate(cues):
        start, end = 2 * i, 2 * i + 1.8
        stamp = "{:02d}:00:{:02d},{:03d}"
        first = stamp.format(0, int(start), 0)
        last = stamp.format(0, int(end), round((end % 1) * 1000))
        out.append(f"{i + 1}\n{first} --> {last}\n{text}\n")
    return "\n".join(out)


def webvtt() -> str:
    """The SubRip cues as WebVTT: a header, a cue identifier and a voice span."""
    body = re.sub(r"(\d\d:\d\d:\d\d),(\d\d\d)", r"\1.\2", subtitles())
    body = body.replace("Where is the bottleneck?", "<v Ashar>Where is the bottleneck?</v>")
    return "WEBVTT\n\n" + body


def docx() -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    document.core_properties.created = WHEN
    document.core_properties.modified = WHEN
    document.add_heading(TITLE, level=1)
    first = document.add_paragraph("We run a ")
    first.add_run("translation microservice").bold = True
    first.add_run(" using FastAPI and vLLM. " + PARAGRAPHS[0].split(". ", 1)[1])
    for text in PARAGRAPHS[1:]:
        document.add_paragraph(text)
    for point in POINTS:
        document.add_paragraph(point, style="List Bullet")
    table = document.add_table(rows=len(CELLS), cols=3)
    for r, row in enumerate(CELLS):
        for c, value in enumerate(row):
            table.cell(r, c).text = str(value)
    out = io.BytesIO()
    document.save(out)
    return _fixed_zip(out.getvalue())


def pptx() -> bytes:
    import pptx as python_pptx
    from pptx.util import Inches

    deck = python_pptx.Presentation()
    deck.core_properties.created = WHEN
    deck.core_properties.modified = WHEN
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    slide.shapes.title.text = TITLE
    slide.placeholders[1].text = PARAGRAPHS[2]
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "The system"
    body = slide.placeholders[1].text_frame
    body.text = POINTS[0]
    for point in POINTS[1:]:
        body.add_paragraph().text = point
    box = slide.shapes.add_textbox(Inches(1), Inches(6), Inches(8), Inches(1))
    box.text_frame.text = PARAGRAPHS[1]
    slide.notes_slide.notes_text_frame.text = PARAGRAPHS[3]
    out = io.BytesIO()
    deck.save(out)
    return _fixed_zip(out.getvalue())


def xlsx() -> bytes:
    import openpyxl  # type: ignore[import-untyped]

    book = openpyxl.Workbook()
    book.properties.created = WHEN
    book.properties.modified = WHEN
    sheet = book.active
    sheet.title = "Journey"
    for row in CELLS:
        sheet.append(list(row))
    sheet["B5"] = "=B3/B2"
    sheet["A5"] = "Speed-up"
    out = io.BytesIO()
    book.save(out)
    return _fixed_zip(out.getvalue())


def _odf(document: object) -> bytes:
    out = io.BytesIO()
    document.save(out)  # type: ignore[attr-defined]
    return _fixed_zip(out.getvalue())


def odt() -> bytes:
    from odf import opendocument, style, text  # type: ignore[import-untyped]

    document = opendocument.OpenDocumentText()
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    document.text.addElement(text.H(outlinelevel=1, text=TITLE))
    first = text.P(text="We run a ")
    first.addElement(text.Span(stylename=bold, text="translation microservice"))
    first.addText(" using FastAPI and vLLM. " + PARAGRAPHS[0].split(". ", 1)[1])
    document.text.addElement(first)
    for paragraph in PARAGRAPHS[1:]:
        document.text.addElement(text.P(text=paragraph))
    items = text.List()
    for point in POINTS:
        item = text.ListItem()
        item.addElement(text.P(text=point))
        items.addElement(item)
    document.text.addElement(items)
    return _odf(document)


def odp() -> bytes:
    from odf import draw, opendocument, presentation, style, text

    document = opendocument.OpenDocumentPresentation()
    layout = style.PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Master", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    for title, lines, note in (
        (TITLE, [PARAGRAPHS[2]], PARAGRAPHS[3]),
        ("The system", POINTS, None),
    ):
        page = draw.Page(masterpagename=master)
        frame = draw.Frame(width="20cm", height="3cm", x="2cm", y="1cm")
        box = draw.TextBox()
        box.addElement(text.P(text=title))
        frame.addElement(box)
        page.addElement(frame)
        frame = draw.Frame(width="20cm", height="10cm", x="2cm", y="5cm")
        box = draw.TextBox()
        for line in lines:
            box.addElement(text.P(text=line))
        frame.addElement(box)
        page.addElement(frame)
        if note:
            notes = presentation.Notes()
            frame = draw.Frame(width="16cm", height="5cm", x="2cm", y="15cm")
            box = draw.TextBox()
            box.addElement(text.P(text=note))
            frame.addElement(box)
            notes.addElement(frame)
            page.addElement(notes)
        document.presentation.addElement(page)
    return _odf(document)


def ods() -> bytes:
    from odf import opendocument, table, text

    document = opendocument.OpenDocumentSpreadsheet()
    sheet = table.Table(name="Journey")
    for row in CELLS:
        tr = table.TableRow()
        for value in row:
            if isinstance(value, float):
                cell = table.TableCell(valuetype="float", value=value)
            else:
                cell = table.TableCell(valuetype="string")
            cell.addElement(text.P(text=str(value)))
            tr.addElement(cell)
        sheet.addElement(tr)
    tr = table.TableRow()
    tr.addElement(table.TableCell(valuetype="string", stringvalue="Speed-up"))
    tr.childNodes[-1].addElement(text.P(text="Speed-up"))
    formula = table.TableCell(formula="of:=[.B3]/[.B2]", valuetype="float", value=3.84)
    formula.addElement(text.P(text="3.84"))
    tr.addElement(formula)
    sheet.addElement(tr)
    document.spreadsheet.addElement(sheet)
    return _odf(document)


def epub() -> bytes:
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        'lang="en" xml:lang="en">\n<head><title>{title}</title>'
        '<link rel="stylesheet" href="style.css"/></head>\n'
        '<body><section epub:type="chapter"><h1>{title}</h1>\n{body}</section></body>\n</html>\n'
    )
    one = "".join(f"<p>{p}</p>\n" for p in PARAGRAPHS[:2])
    two = "".join(f"<p>{p}</p>\n" for p in PARAGRAPHS[2:]) + "<ul>"
    two += "".join(f"<li>{p}</li>" for p in POINTS) + "</ul>\n"
    nav = (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        'lang="en" xml:lang="en">\n<head><title>Contents</title></head>\n<body>'
        '<nav epub:type="toc"><h1>Contents</h1><ol>'
        '<li><a href="one.xhtml">The problem</a></li><li><a href="two.xhtml">The system</a></li>'
        "</ol></nav></body>\n</html>\n"
    )
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">\n'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="id">urn:uuid:5b0c7c1e-3d6a-4c53-9f44-tolk-sample</dc:identifier>'
        f"<dc:title>{TITLE}</dc:title><dc:language>en</dc:language>"
        "<dc:creator>Ashar Mirza</dc:creator>"
        f"<dc:description>{PARAGRAPHS[3]}</dc:description>"
        '<meta property="dcterms:modified">2026-11-26T12:00:00Z</meta></metadata>\n'
        '<manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" '
        'properties="nav"/><item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="two" href="two.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="css" href="style.css" media-type="text/css"/></manifest>\n'
        '<spine><itemref idref="one"/><itemref idref="two"/></spine>\n</package>\n'
    )
    container = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" '
        'media-type="application/oebps-package+xml"/></rootfiles></container>\n'
    )
    members = {
        "META-INF/container.xml": container,
        "OEBPS/content.opf": opf,
        "OEBPS/nav.xhtml": nav,
        "OEBPS/one.xhtml": chapter.format(title="The problem", body=one),
        "OEBPS/two.xhtml": chapter.format(title="The system", body=two),
        "OEBPS/style.css": "body { font-family: serif; }\n",
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        mimetype = zipfile.ZipInfo("mimetype", WHEN.timetuple()[:6])
        archive.writestr(mimetype, "application/epub+zip", zipfile.ZIP_STORED)
        for name, content in members.items():
            info = zipfile.ZipInfo(name, WHEN.timetuple()[:6])
            archive.writestr(info, content, zipfile.ZIP_DEFLATED)
    return out.getvalue()


def po() -> str:
    import polib

    catalogue = polib.POFile()
    catalogue.metadata = {
        "Project-Id-Version": "tolk-sample 1.0",
        "Language": "",
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
        "Plural-Forms": "nplurals=2; plural=(n != 1);",
    }
    catalogue.append(polib.POEntry(msgid=TITLE, msgstr=""))
    catalogue.append(polib.POEntry(msgid="Hello, %s! Your request is queued.", msgstr=""))
    catalogue.append(
        polib.POEntry(
            msgid="%(count)d request is waiting",
            msgid_plural="%(count)d requests are waiting",
            msgstr_plural={0: "", 1: ""},
            flags=["python-format"],
        )
    )
    catalogue.append(polib.POEntry(msgid=PARAGRAPHS[2], msgstr=""))
    return str(catalogue)


def xliff() -> str:
    units = [
        ("title", TITLE),
        ("greeting", 'Hello, <x id="INTERPOLATION" equiv-text="{{ name }}"/>! Welcome back.'),
        ("link", 'Read the <x id="START_LINK" ctype="x-a"/>second part<x id="CLOSE_LINK"/>.'),
        ("question", PARAGRAPHS[2]),
    ]
    body = "".join(
        f'      <trans-unit id="{uid}" datatype="html">\n        <source>{src}</source>\n'
        "      </trans-unit>\n"
        for uid, src in units
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">\n'
        '  <file source-language="en" datatype="plaintext" original="ng2.template">\n'
        f"    <body>\n{body}    </body>\n  </file>\n</xliff>\n"
    )


def locale_json() -> str:
    messages = {
        "title": TITLE,
        "greeting": "Hello, {{name}}! Your request is queued.",
        "queue": {
            "waiting_one": "{{count}} request is waiting",
            "waiting_other": "{{count}} requests are waiting",
        },
        "question": PARAGRAPHS[2],
    }
    return json.dumps(messages, indent=2, ensure_ascii=False) + "\n"


def locale_yaml() -> str:
    return (
        "# The sample application's English strings\n"
        "en:\n"
        f'  title: "{TITLE}"\n'
        '  greeting: "Hello, %{name}! Your request is queued."\n'
        "  queue:\n"
        '    waiting: "%{count} requests are waiting"\n'
        f'  question: "{PARAGRAPHS[2]}"\n'
    )


def pdf() -> bytes:
    from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped]
    from reportlab.lib.styles import getSampleStyleSheet  # type: ignore[import-untyped]
    from reportlab.platypus import (  # type: ignore[import-untyped]
        ListFlowable,
        Paragraph,
        SimpleDocTemplate,
    )

    out = io.BytesIO()
    styles = getSampleStyleSheet()
    story = [Paragraph(TITLE, styles["Title"])]
    story += [Paragraph(PARAGRAPHS[0].replace("FastAPI", "<b>FastAPI</b>"), styles["BodyText"])]
    story += [Paragraph(p, styles["BodyText"]) for p in PARAGRAPHS[1:]]
    story += [ListFlowable([Paragraph(p, styles["BodyText"]) for p in POINTS])]
    document = SimpleDocTemplate(
        out, pagesize=A4, invariant=1, title=TITLE, author="tolk", creator="tolk"
    )
    document.build(story)
    return out.getvalue()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    texts = {
        "notes.md": markdown(),
        "page.html": html(),
        "talk.srt": subtitles(),
        "talk.vtt": webvtt(),
        "readme.txt": "\n\n".join([TITLE, *PARAGRAPHS]) + "\n",
        "messages.po": po(),
        "app.xlf": xliff(),
        "strings.json": locale_json(),
        "locale.yaml": locale_yaml(),
    }
    for name, content in texts.items():
        (OUT / name).write_text(content, encoding="utf-8")
    binaries = {
        "report.docx": docx,
        "slides.pptx": pptx,
        "journey.xlsx": xlsx,
        "letter.odt": odt,
        "talk.odp": odp,
        "sheet.ods": ods,
        "book.epub": epub,
        "paper.pdf": pdf,
    }
    for name, make in binaries.items():
        (OUT / name).write_bytes(make())
    sys.stdout.write(f"wrote {len(texts) + len(binaries)} files to {OUT}\n")


if __name__ == "__main__":
    main()
