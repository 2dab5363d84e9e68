"""The GIL boundary: a worker process owns the openvino-genai pipeline; an asyncio client drives it.

openvino-genai's `step()`, `add_request()` and handle reads hold the GIL for a whole engine step
(10 to 900 ms), so an engine driven in the HTTP process would freeze the event loop. Each servable's
pipeline therefore lives in its own process (`worker`), and the frontend talks to it over
pipes (`client`) with the small messages in `messages`.
"""
