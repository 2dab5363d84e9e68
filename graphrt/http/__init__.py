"""The aiohttp frontend: OpenAI routes, OVMS/KServe system routes, middleware."""
