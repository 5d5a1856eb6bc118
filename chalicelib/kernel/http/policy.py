"""How each route is authenticated. Default: a user credential. Declared by the blueprints
when they register routes, read by the middleware (and the OpenAPI generator)."""
from __future__ import annotations

PUBLIC: set[str] = set()       # resource paths that need no credential
SERVICE: set[str] = set()      # resource paths authenticated by the internal service token
MCP: set[str] = set()          # the MCP connector: its own challenge and token audience (features/mcp/auth.py)


def public(path: str) -> str:
    PUBLIC.add(path)
    return path


def service(path: str) -> str:
    SERVICE.add(path)
    return path


def mcp(path: str) -> str:
    MCP.add(path)
    return path


def of(resource_path: str | None) -> str:
    if resource_path in PUBLIC:
        return 'public'
    if resource_path in SERVICE:
        return 'service'
    if resource_path in MCP:
        return 'mcp'
    return 'user'
