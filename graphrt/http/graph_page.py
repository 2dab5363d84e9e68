"""The live graph page: every servable's graph drawn, with its figures updated every second.

    GET /graphs                   HTML: every servable with its state
    GET /graphs/{name}            HTML: the graph drawn (graphruntime.layout) with live figures
    GET /graphs/{name}/stats      JSON: the same figures, for scripts
    GET /graphs/{name}/events     SSE: one JSON snapshot per second, what the page listens to
    POST /graphs/login            form: the API key (and the page to go back to); sets a cookie

The page is one self-contained HTML document (inline SVG, script and style; nothing fetched from
elsewhere), so it works offline and behind any proxy. Figures are aggregated per servable across
all its request runs (see graphruntime.stats) plus, for LLM nodes, the engine's figures.

With an API key set (--api_key_file / $API_KEY) these routes want it too: scripts send
`Authorization: Bearer KEY`; a browser without it gets a login form, which POSTs the key to
/graphs/login (so it never appears in an address, the history or an access log: a key in the
query string is not accepted). The answer is a 303 back to the page with a cookie (HttpOnly,
SameSite=Strict, Max-Age COOKIE_SECONDS) holding not the key but its expiry, a random salt and
an HMAC of both keyed with the API key; the server checks the HMAC and the expiry.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import html
import json
import secrets
import time
from importlib import resources
from typing import Any
from urllib.parse import quote

from aiohttp import web
from google.protobuf import text_format

from graphrt.http.state import STATE
from graphrt.serving.graph_servable import GraphServable
from graphruntime.drawing import subgraph_label
from graphruntime.layout import layout, to_svg

COOKIE = "graphrt_graphs"
COOKIE_SECONDS = 12 * 3600  # how long a browser stays logged in to the graph page
EVENT_INTERVAL_SECONDS = 1.0


def _static(name: str) -> str:
    return (resources.files("graphrt.http") / "static" / name).read_text("utf-8")


def _cookie_token(api_key: str, expires: int, salt: str) -> str:
    message = f"graphrt graph page|{expires}|{salt}".encode()
    return hmac.new(api_key.encode(), message, hashlib.sha256).hexdigest()


def new_cookie(api_key: str, now: float | None = None) -> str:
    """A cookie value that proves the API key for COOKIE_SECONDS: `expires.salt.hmac`."""
    expires = int(now if now is not None else time.time()) + COOKIE_SECONDS
    salt = secrets.token_hex(16)
    return f"{expires}.{salt}.{_cookie_token(api_key, expires, salt)}"


def cookie_valid(api_key: str, cookie: str, now: float | None = None) -> bool:
    parts = cookie.split(".")
    if len(parts) != 3 or not parts[0].isdigit():
        return False
    expires, salt, token = int(parts[0]), parts[1], parts[2]
    if expires < (now if now is not None else time.time()):
        return False
    return hmac.compare_digest(token.encode(), _cookie_token(api_key, expires, salt).encode())


def _authorized(request: web.Request) -> bool:
    api_key = request.app[STATE].settings.api_key
    if not api_key:
        return True
    given = request.headers.get("Authorization", "")
    if hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
        return True
    cookie = request.cookies.get(COOKIE, "")
    return bool(cookie) and cookie_valid(api_key, cookie)


LOGIN_FORM = """<!doctype html><html><head><meta charset="utf-8"><title>graphrt: API key</title>
</head><body style="font-family: sans-serif; margin: 3em"><h1>API key required</h1>
<p>This server has an API key. Enter it to see its graphs (scripts send an
<code>Authorization: Bearer</code> header instead).</p>{error}
<form method="post" action="/graphs/login"><input type="hidden" name="next" value="{next}">
<input type="password" name="api_key" autofocus size="40" autocomplete="current-password">
<button type="submit">Open</button></form></body></html>"""


def _login_form(next_page: str, error: str = "") -> web.Response:
    text = LOGIN_FORM.replace("{error}", f"<p><b>{html.escape(error)}</b></p>" if error else "")
    text = text.replace("{next}", html.escape(next_page, quote=True))
    return web.Response(
        status=401, text=text, content_type="text/html", headers={"Cache-Control": "no-store"}
    )


def _next_page(value: str) -> str:
    """Where to go after logging in: a graph page of this server, nothing else."""
    local = value == "/graphs" or value.startswith("/graphs/")
    if local and "\\" not in value and not any(ord(char) < 32 for char in value):
        return value
    return "/graphs"


def _guard(request: web.Request, page: bool) -> web.StreamResponse | None:
    """None when the request may go on, else the answer to send (a 401, a login form for pages)."""
    if _authorized(request):
        return None
    if page:
        return _login_form(str(request.rel_url.with_query(None)))
    return web.json_response(
        {"error": "Unauthorized: send Authorization: Bearer <API key>"}, status=401
    )


async def login(request: web.Request) -> web.StreamResponse:
    """The login form's POST: a cookie and a 303 to the page, or the form again."""
    form = await request.post()
    given, next_value = form.get("api_key", ""), form.get("next", "")
    next_page = _next_page(next_value if isinstance(next_value, str) else "")
    api_key = request.app[STATE].settings.api_key
    if not api_key:
        raise web.HTTPSeeOther(next_page)
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), api_key.encode()):
        return _login_form(next_page, "That is not the API key.")
    response = web.Response(
        status=303, headers={"Location": next_page, "Cache-Control": "no-store"}
    )
    response.set_cookie(
        COOKIE,
        new_cookie(api_key),
        max_age=COOKIE_SECONDS,
        httponly=True,
        samesite="Strict",
        path="/graphs",
    )
    return response


def _servable(request: web.Request) -> GraphServable:
    name = request.match_info["name"]
    servable = request.app[STATE].repository.servables.get(name)
    if servable is None:
        raise web.HTTPNotFound(text=f"No graph named {name}")
    return servable


def snapshot(servable: GraphServable) -> dict[str, Any]:
    """What /stats answers and /events streams."""
    watch = servable.watch
    body: dict[str, Any] = {
        "name": servable.name,
        "state": servable.state.value,
        "error": servable.error,
        "in_flight": servable.in_flight,
        "time": time.time(),
        "live": bool(watch and watch.stats),
    }
    if watch is not None and watch.stats is not None:
        body.update(watch.stats.snapshot())
        body["engines"] = watch.engine_snapshot()
        body["pipelines"] = watch.pipeline_snapshot()
    return body


# ------------------------------------------------------------------------------------- pages


def _page(title: str, body: str, script: str = "") -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_static('graph_page.css')}</style></head><body>{body}"
        + (f"<script>{script}</script>" if script else "")
        + "</body></html>"
    )


async def list_graphs(request: web.Request) -> web.StreamResponse:
    refused = _guard(request, page=True)
    if refused is not None:
        return refused
    repository = request.app[STATE].repository
    rows = []
    for name, servable in sorted(repository.servables.items()):
        link = f'<a href="/graphs/{quote(name, safe="")}">{html.escape(name)}</a>'
        state = servable.state.value
        rows.append(
            f"<tr><td>{link}</td><td class='state {state.lower()}'>{state}</td>"
            f"<td>{servable.in_flight}</td><td>{html.escape(servable.error or '')}</td></tr>"
        )
    for name, model in sorted(repository.models.items()):
        states = ", ".join(
            f"v{v.number} {v.state.value}" for v in sorted(model.versions.values(), key=_number)
        )
        rows.append(
            f"<tr><td>{html.escape(name)} <small>(model)</small></td><td>{states}</td>"
            "<td></td><td></td></tr>"
        )
    body = (
        "<header><h1>graphrt graphs</h1></header><main class='list'><table>"
        "<thead><tr><th>name</th><th>state</th><th>requests in flight</th><th>error</th></tr>"
        "</thead><tbody>" + "".join(rows) + "</tbody></table></main>"
    )
    return web.Response(text=_page("graphrt graphs", body), content_type="text/html")


def _number(version: Any) -> int:
    number: int = version.number
    return number


def _node_details(servable: GraphServable) -> dict[str, Any]:
    """Per calculator (by config index): name, calculator and its node config as pbtxt."""
    graph = servable.graph
    assert graph is not None
    details: dict[str, Any] = {}
    for spec in graph.nodes:
        node = type(graph.config.proto.node[0])()
        node.CopyFrom(graph.config.proto.node[spec.config_index])
        # Options of types unknown when the file was parsed are kept aside as text (config.py):
        # shown decoded with the calculator's options type, not as an empty block.
        options_type = getattr(spec.calculator, "options_type", None)
        decoded = graph.node_options(spec, options_type) if options_type else None
        if decoded is not None and graph.config.opaque_options("node", spec.config_index):
            del node.node_options[:]
            node.node_options.add().Pack(decoded)
        details[str(spec.config_index)] = {
            "name": spec.name,
            "calculator": spec.calculator_name,
            "config": text_format.MessageToString(node),
            "llm": bool(servable.watch and spec.name in servable.watch.engines),
            "subgraph": " > ".join(subgraph_label(use) for use in spec.subgraphs),
        }
    return details


async def show_graph(request: web.Request) -> web.StreamResponse:
    refused = _guard(request, page=True)
    if refused is not None:
        return refused
    servable = _servable(request)
    name = html.escape(servable.name)
    header = (
        f"<header><a href='/graphs'>graphs</a> / <h1>{name}</h1>"
        f"<span id='state' class='state'>{servable.state.value}</span>"
        "<span id='runs'></span><span id='live' class='live'>connecting…</span></header>"
    )
    if servable.graph is None:
        body = header + f"<main><p>{html.escape(servable.error or 'not loaded')}</p></main>"
        return web.Response(text=_page(servable.name, body), content_type="text/html")
    watch = servable.watch
    lines = 3 if watch and (watch.engines or watch.pipelines) else 2
    picture = to_svg(layout(servable.graph.config, figure_lines=lines), figure_lines=lines)
    setup = {
        "events": f"/graphs/{quote(servable.name, safe='')}/events",
        "nodes": _node_details(servable),
    }
    body = (
        header + "<main><section id='picture'>" + picture + "</section>"
        "<aside id='details'><p class='hint'>Click a node for its options and errors.</p></aside>"
        "</main>"
    )
    # "</" cannot end the script early: JSON escapes it.
    script = (
        "const GRAPHRT = "
        + json.dumps(setup).replace("</", "<\\/")
        + ";\n"
        + _static("graph_page.js")
    )
    return web.Response(text=_page(servable.name, body, script), content_type="text/html")


async def graph_stats(request: web.Request) -> web.StreamResponse:
    refused = _guard(request, page=False)
    if refused is not None:
        return refused
    return web.json_response(snapshot(_servable(request)))


async def graph_events(request: web.Request) -> web.StreamResponse:
    """A snapshot per second until the client leaves or the server shuts down."""
    refused = _guard(request, page=False)
    if refused is not None:
        return refused
    servable = _servable(request)
    state = request.app[STATE]
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    try:
        while not state.dataplane.shutting_down:
            # A reload replaces the servable: follow the current one of that name.
            current = state.repository.servables.get(servable.name, servable)
            data = json.dumps(snapshot(current), separators=(",", ":"))
            await response.write(f"data: {data}\n\n".encode())
            await asyncio.sleep(EVENT_INTERVAL_SECONDS)
    except (ConnectionResetError, ConnectionError):
        pass
    return response


def add_routes(app: web.Application) -> None:
    app.router.add_get("/graphs", list_graphs)
    app.router.add_post("/graphs/login", login)
    app.router.add_get("/graphs/{name}", show_graph)
    app.router.add_get("/graphs/{name}/stats", graph_stats)
    app.router.add_get("/graphs/{name}/events", graph_events)
