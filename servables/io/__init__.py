"""Requests' and answers' data: audio files in and out, request images under the server's media
policy, text split into sentences, and the typed reading of a JSON body or a multipart form."""
