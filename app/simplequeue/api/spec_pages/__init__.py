"""The API's docs pages: /docs (Swagger UI) and /redoc (ReDoc), on the spec at /openapi.json.

Their scripts and styles are the builds of Swagger UI and ReDoc that the fastapi-standalone-docs
package ships (Apache-2.0 and MIT, their licences beside them there), served from this service
under the dashboard's headers: the pages work air-gapped and run no code from another site. Each
page is a file here with no inline script, as the CSP requires; its URLs are relative, so the
pages work behind a path prefix too.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import FileResponse

from simplequeue.api.page_headers import WithPageHeaders, page_headers

HERE = Path(__file__).parent
BUILDS = "fastapi_standalone_docs"
IMAGES = "img-src 'self' data:"
"""Both viewers' stylesheets draw their icons as data: URLs (an image runs no script)."""
REDOC = (
    # ReDoc styles itself as it runs: its styled-components make empty <style> elements and fill
    # them through the CSSOM (allowed by the empty text's hash), and it adds perfect-scrollbar's
    # stylesheet as one <style> (allowed by its hash in ReDoc 2.5.4, fastapi-standalone-docs 0.3's
    # build; should a later build's differ, the CSP refuses it and the browser test says so). No
    # other inline style.
    "style-src 'self' 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=' "
    "'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='",
    # Its search runs in a worker that its own script makes from a blob.
    "worker-src blob:",
)


def mount_spec_pages(app: FastAPI) -> None:
    """Each page at its path, and its files under the path and a slash (ReDoc's build asks for
    its logo at the page's path + /logo-mini.svg): ours first, then the build's."""
    app.add_route("/docs", swagger_ui, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_route("/redoc", redoc, methods=["GET", "HEAD"], include_in_schema=False)
    for path, name in (("/docs", "swagger"), ("/redoc", "redoc")):
        files = StaticFiles(directory=HERE / name, packages=[(BUILDS, f"static/{name}")])
        app.mount(path, WithPageHeaders(files, page_headers(IMAGES)), name=f"{name}-files")


async def swagger_ui(request: Request) -> FileResponse:
    return FileResponse(HERE / "swagger.html", headers=page_headers(IMAGES))


async def redoc(request: Request) -> FileResponse:
    return FileResponse(HERE / "redoc.html", headers=page_headers(IMAGES, *REDOC))
