"""The operators' console at `/console`: one static page (HTML, CSS, JS and two vendored libraries,
uPlot for charts and js-yaml for the policy editor, in `static/`; nothing is fetched at run time)
that is a thin client of the admin API. Off (404) unless the admin token is set, like the admin
API; the page itself holds no data, and every call it makes carries the token the operator types.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from engines.errors import NotFoundError
from router.gateway.orchestration import replica_gateway

STATIC = Path(__file__).parent / "static"
ASSETS = {p.relative_to(STATIC).as_posix(): p for p in STATIC.rglob("*") if p.is_file() and p.suffix in {".js", ".css", ".html"}}
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
# The page runs only its own scripts and talks only to this origin.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

console = APIRouter(prefix="/console", include_in_schema=False)


def console_on(gw=Depends(replica_gateway)) -> None:
    if not gw.admin_token:
        raise NotFoundError("the console is off: start Tandem with TANDEM_ADMIN_TOKEN set", code="admin_disabled")


def _file(name: str) -> FileResponse:
    path = ASSETS.get(name)
    if path is None:
        raise NotFoundError(f"no console asset {name!r}", code="not_found")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)


@console.get("", dependencies=[Depends(console_on)])
@console.get("/", dependencies=[Depends(console_on)])
async def page():
    return _file("index.html")


@console.get("/static/{name:path}", dependencies=[Depends(console_on)])
async def asset(name: str):
    return _file(name)
