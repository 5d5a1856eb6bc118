"""Identity: who is calling (credentials, JWTs, the service token), the request gate and rate
limits, API keys, users, organizations, memberships and first-run bootstrap.
"""
