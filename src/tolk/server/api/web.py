"""`GET /`: a small page to try the server, as LibreTranslate has: source and target pickers
from `/languages`, auto-detection, a text box, file upload, the model and the timing.
Plain HTML and JavaScript shipped in the package (tolk/server/static): no build step."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["web page"])


@router.get("/", response_class=HTMLResponse, summary="A page to try translations in a browser")
async def index() -> HTMLResponse:
    page = resources.files("tolk.server").joinpath("static/index.html").read_text("utf-8")
    return HTMLResponse(page)
