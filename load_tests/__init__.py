"""Load tests: /ping against peer servers, SIGHUP under load, RSS per idle connection."""
