"""The MCP tool connector (docs/api/mcp.md): ``auth`` (who may call it: its
challenge, token audience and Origin rule), ``protocol`` (the stateless JSON-RPC layer over
the ``mcp_types`` models), ``tools`` (the 20 tools, thin adapters over the services)."""
