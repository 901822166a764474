"""A generic pre-fork process manager: master, gevent workers, shared memory.

Nothing here imports ``socketify``; the master side never imports gevent, asyncio or
concurrent.futures (workers import gevent only after fork).

- ``master``: ``Master(config, target)`` binds, forks and supervises (signals, reload,
  scaling, heartbeats, respawn backoff); ``BootError``.
- ``config``: ``MasterConfig``, the frozen settings.
- ``worker``: what a forked child runs before ``target(ctx)`` (signals, parent-death signal,
  monkey-patching, heartbeat greenlet, exit codes; ``BOOT_FAILED = 3``).
- ``context``: ``WorkerContext``, the target's view: sockets, ``ready()``, ``request_done()``,
  ``on_stop()``, ``wait_stop()``, ``stopping``/``graceful``.
- ``sockets``: bind specs (``HOST:PORT``, ``[V6]:PORT``, ``:PORT``, ``unix:PATH``),
  ``BindError``, ``format_address``.
- ``listeners``: per-slot SO_REUSEPORT sockets owned by the master; shared Unix sockets and
  sockets passed by systemd.
- ``heartbeat``: per-worker records in an anonymous shared mmap.
- ``roster``: the master's view of its worker processes and the respawn backoff.
- ``signals``: the master's signal queue and self-pipe.
- ``fork``: forking a worker safely and collecting its exit; ``exits``: what an exit means.
- ``systemd``: sd_notify (READY, RELOADING, STOPPING, STATUS, the watchdog) and LISTEN_FDS.
- ``reloader``: mtime polling for ``--reload``.  ``logfiles``: reopen FileHandlers (USR1).
- ``linux``: prctl (parent-death signal, process name) and ``tcp_migrate_req``.
- ``shm``: SPSC rings of length-prefixed records in shared memory, with an eventfd per reader.
- ``state_server``: the master's thread that owns the store and relays the bus, over rings.
- ``link``: a worker's end of its rings (requests and answers, bus records, from the hub).
- ``state``: ``client()``, the cross-worker key/value store; ``LocalState`` without a master.
- ``bus``: ``bus()``, cross-worker publish/subscribe; ``LocalBus`` without a master.
- ``kvstore``: the store engine (TTLs, incr, token buckets); ``wire``: the record formats.
"""
