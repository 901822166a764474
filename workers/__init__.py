"""A generic pre-fork process manager: master, gevent workers, shared memory."""
