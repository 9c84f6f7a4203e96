"""The media types of PowerPoint and Excel files."""

from __future__ import annotations

PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
