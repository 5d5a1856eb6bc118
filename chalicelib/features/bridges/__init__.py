"""Service bridges: the proxy behind the egress fence, organization secrets, the agent tools."""
