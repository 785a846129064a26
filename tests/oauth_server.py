"""The tests' loopback authorization server: OAuth 2.1 / OpenID Connect over real HTTP.

Serves, for each realm (`tests.oauth_realm`): RFC 8414 metadata (path-suffixed form) and OpenID
discovery, the JWKS (up, down = 503, or slow = held until released), an authorization endpoint
with a login page (authorization code + PKCE S256, `state`, `nonce`, RFC 9207 `iss`), a token
endpoint (authorization_code, refresh_token, client_credentials; RFC 8707 `resource` becomes the
token's `aud`), dynamic client registration (RFC 7591), RFC 7662 introspection and an OpenID
RP-initiated logout endpoint. It runs in its own thread with its own event loop, so a test that
blocks (a subprocess, a browser) never stalls it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import secrets
import socket
import threading
from typing import Any
from urllib.parse import urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.oauth_realm import Client, PendingCode, Realm

LOGIN_PAGE = """<!doctype html><html><head><title>Sign in to {realm}</title></head><body>
<h1>Sign in to {realm}</h1>{error}
<form method="post"><label for="username">Username</label><input id="username" name="username">
<label for="password">Password</label><input id="password" name="password" type="password">
<button type="submit" id="kc-login">Sign in</button></form></body></html>"""


def _error(error: str, description: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


class OAuthServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.base_url = f"http://{host}:{self.port}"
        self.realms: dict[str, Realm] = {}
        self._server = uvicorn.Server(
            uvicorn.Config(self._app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        )
        self._thread = threading.Thread(target=self._run, name="oauth-server", daemon=True)

    def realm(self, name: str, **options: Any) -> Realm:
        self.realms[name] = Realm(self.base_url, name, **options)
        return self.realms[name]

    def start(self) -> OAuthServer:
        self._thread.start()
        started = threading.Event()

        def check() -> None:
            while not self._server.started and self._thread.is_alive():
                started.wait(0.01)  # uvicorn exposes no started event (another thread's loop)

        check()
        assert self._server.started, "the loopback authorization server did not start"
        return self

    def stop(self) -> None:
        for realm in self.realms.values():
            realm.slow_release.set()
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._socket]))

    def _realm(self, request: Request) -> Realm:
        return self.realms[request.path_params["realm"]]

    def _app(self) -> Starlette:
        realm_path = "/realms/{realm}"
        return Starlette(
            routes=[
                Route(f"/.well-known/oauth-authorization-server{realm_path}", self.metadata),
                Route(f"{realm_path}/.well-known/openid-configuration", self.metadata),
                Route(f"{realm_path}/jwks", self.jwks),
                Route(f"{realm_path}/authorize", self.authorize, methods=["GET", "POST"]),
                Route(f"{realm_path}/token", self.token, methods=["POST"]),
                Route(f"{realm_path}/register", self.register, methods=["POST"]),
                Route(f"{realm_path}/introspect", self.introspect, methods=["POST"]),
                Route(f"{realm_path}/logout", self.logout),
            ]
        )

    async def metadata(self, request: Request) -> Response:
        realm = self._realm(request)
        return JSONResponse(
            {
                "issuer": realm.issuer,
                "authorization_endpoint": realm.endpoint("authorize"),
                "token_endpoint": realm.endpoint("token"),
                "jwks_uri": realm.endpoint("jwks"),
                "registration_endpoint": realm.endpoint("register"),
                "introspection_endpoint": realm.endpoint("introspect"),
                "end_session_endpoint": realm.endpoint("logout"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                "subject_types_supported": ["public"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def jwks(self, request: Request) -> Response:
        realm = self._realm(request)
        realm.jwks_requests += 1
        if realm.jwks_mode == "down":
            return _plain("unavailable", 503)
        if realm.jwks_mode == "slow":
            await asyncio.to_thread(realm.slow_release.wait, 60)
        return JSONResponse(realm.jwks())

    async def authorize(self, request: Request) -> Response:
        realm = self._realm(request)
        params = dict(request.query_params)
        client = realm.clients.get(params.get("client_id", ""))
        if client is None or params.get("redirect_uri") not in client.redirect_uris:
            return _plain("unknown client or redirect_uri", 400)
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return _plain("PKCE S256 is required", 400)
        if request.method == "GET":
            return self._login_page(realm)
        form = await request.form()
        username, password = str(form.get("username", "")), str(form.get("password", ""))
        user = realm.users.get(username)
        if user is None or not secrets.compare_digest(user.password, password):
            return self._login_page(realm, error="Invalid username or password.")
        code = secrets.token_urlsafe(24)
        requested = params.get("scope", "").split()
        granted = [scope for scope in requested if scope in ("openid", "profile") or scope in user.scopes]
        realm.codes[code] = PendingCode(
            client_id=client.client_id,
            redirect_uri=params["redirect_uri"],
            code_challenge=params["code_challenge"],
            user=username,
            scope=" ".join(granted),
            resource=params.get("resource"),
            nonce=params.get("nonce"),
        )
        answer = {"code": code, "state": params.get("state", ""), "iss": realm.issuer}
        return RedirectResponse(f"{params['redirect_uri']}?{urlencode(answer)}", status_code=302)

    @staticmethod
    def _login_page(realm: Realm, error: str = "") -> HTMLResponse:
        """The form posts back to the same URL: the authorization request's parameters come along."""
        error_html = f"<p id='error'>{error}</p>" if error else ""
        return HTMLResponse(LOGIN_PAGE.format(realm=html.escape(realm.name), error=error_html))

    async def token(self, request: Request) -> Response:
        realm = self._realm(request)
        form = {key: str(value) for key, value in (await request.form()).items()}
        client = self._client(realm, request, form)
        if client is None:
            return _error("invalid_client", "unknown client or wrong secret", 401)
        grant = form.get("grant_type")
        if grant == "authorization_code":
            return self._code_grant(realm, client, form)
        if grant == "refresh_token":
            return self._refresh_grant(realm, client, form)
        if grant == "client_credentials" and client.secret is not None:
            scope = " ".join(
                s for s in form.get("scope", " ".join(client.scopes)).split() if s in client.scopes
            )
            claims = {**client.claims, "client_id": client.client_id}
            token = realm.mint(client.client_id, audience=form.get("resource"), scope=scope, claims=claims)
            return JSONResponse(
                {"access_token": token, "token_type": "Bearer", "expires_in": 300, "scope": scope}
            )
        return _error("unsupported_grant_type", f"grant {grant!r} is not supported here")

    @staticmethod
    def _client(realm: Realm, request: Request, form: dict[str, str]) -> Client | None:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        basic = request.headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            decoded = base64.b64decode(basic[6:]).decode()
            client_id, _, secret = decoded.partition(":")
        client = realm.clients.get(client_id or "")
        if client is None or (client.secret is not None and client.secret != secret):
            return None
        return client

    @staticmethod
    def _code_grant(realm: Realm, client: Client, form: dict[str, str]) -> Response:
        pending = realm.codes.pop(form.get("code", ""), None)
        if pending is None or pending.client_id != client.client_id:
            return _error("invalid_grant", "unknown or used code")
        if pending.redirect_uri != form.get("redirect_uri"):
            return _error("invalid_grant", "redirect_uri differs from the authorization request")
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if not secrets.compare_digest(challenge, pending.code_challenge):
            return _error("invalid_grant", "PKCE verification failed")
        resource = form.get("resource") or pending.resource
        answer = _tokens(realm, client.client_id, pending.user, resource, pending.scope)
        if "openid" in pending.scope.split():
            answer["id_token"] = realm.id_token(pending.user, client.client_id, pending.nonce)
        return JSONResponse(answer)

    @staticmethod
    def _refresh_grant(realm: Realm, client: Client, form: dict[str, str]) -> Response:
        held = realm.refresh_tokens.pop(form.get("refresh_token", ""), None)
        if held is None or held[0] != client.client_id:
            return _error("invalid_grant", "unknown refresh token")
        _, user, resource, scope = held
        return JSONResponse(_tokens(realm, client.client_id, user, form.get("resource") or resource, scope))

    async def register(self, request: Request) -> Response:
        realm = self._realm(request)
        metadata = await request.json()
        client = Client(
            client_id=f"dyn-{secrets.token_hex(6)}", redirect_uris=tuple(metadata.get("redirect_uris", ()))
        )
        realm.clients[client.client_id] = client
        answer = {**metadata, "client_id": client.client_id, "token_endpoint_auth_method": "none"}
        return JSONResponse(answer, status_code=201)

    async def introspect(self, request: Request) -> Response:
        realm = self._realm(request)
        form = {key: str(value) for key, value in (await request.form()).items()}
        client = self._client(realm, request, form)
        if client is None or client.secret is None:
            return _error("invalid_client", "introspection needs a confidential client", 401)
        realm.introspections += 1
        return JSONResponse(realm.opaque_tokens.get(form.get("token", ""), {"active": False}))

    async def logout(self, request: Request) -> Response:
        realm = self._realm(request)
        params = dict(request.query_params)
        realm.sign_outs.append(params)
        target = params.get("post_logout_redirect_uri")
        if target:
            return RedirectResponse(target, status_code=302)
        return HTMLResponse("<p>You are signed out.</p>")


def _plain(text: str, status: int) -> Response:
    return Response(text, status_code=status, media_type="text/plain")


def _tokens(realm: Realm, client_id: str, user: str, resource: str | None, scope: str) -> dict[str, Any]:
    refresh = secrets.token_urlsafe(24)
    realm.refresh_tokens[refresh] = (client_id, user, resource, scope)
    access = realm.mint(user, audience=resource, scope=scope, claims={"client_id": client_id})
    return {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": 300,
        "scope": scope,
        "refresh_token": refresh,
    }
