"""What every servable runs on: the bound on the queue in front of an engine (admission), the
restart of a dead worker process (supervision), the thread that runs one image or audio pipeline
request at a time and the servable base around it, and the histograms servables keep for
/metrics."""
