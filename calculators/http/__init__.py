"""The contract between HTTP and graphs: what a graph that answers HTTP requests receives, what it
may send back, and which API a path is.

The application (graphrt.http) turns a request into an `HttpPayload` packet on the graph input
tagged HTTP_REQUEST_PAYLOAD and sends back what arrives on the output tagged
HTTP_RESPONSE_PAYLOAD; calculators (the LLM, encoder, image and audio nodes, and users' own) read
the payload and emit replies. Neither side imports the other: both import this package, which
imports no HTTP framework.
"""
