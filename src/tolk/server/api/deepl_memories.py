"""DeepL API v3's translation memories (`/v3/translation_memories`, the client's
`list_translation_memories`), over tolk's (tolk.store.memories): TMX files an operator imports with
`tolk memories import`, listed for every key, and used by `/v2/translate`'s
`translation_memory_id` and `translation_memory_threshold` (DeepL makes memories in its web
app; so does tolk's command line, not the API)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from tolk.errors import InvalidRequest
from tolk.server.gateway import DeepLCallerDep, MemoriesDep

router = APIRouter(prefix="/v3/translation_memories", tags=["DeepL API v3: translation memories"])


@router.get("", summary="DeepL v3: the translation memories (imported from TMX files)")
async def list_all(request: Request, caller: DeepLCallerDep, memories: MemoriesDep) -> JSONResponse:
    # (`caller`: a valid key, as every call)
    query = request.query_params
    try:
        page, size = int(query.get("page", 0)), int(query.get("page_size", 25))
    except ValueError:
        raise InvalidRequest("page and page_size are numbers") from None
    if page < 0 or not 1 <= size <= 25:
        raise InvalidRequest("page is 0 or more, page_size 1 to 25", field="page_size")
    listed = await asyncio.to_thread(memories.all) if memories is not None else []
    return JSONResponse(
        {
            "translation_memories": [
                {
                    "translation_memory_id": m.id,
                    "name": m.name,
                    "source_language": m.source_lang,
                    "target_languages": list(m.target_langs),
                    "segment_count": m.segments,
                }
                for m in listed[page * size : (page + 1) * size]
            ],
            "total_count": len(listed),
        }
    )
