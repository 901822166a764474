"""Apps the integration tests serve with the real `socketify run`."""
