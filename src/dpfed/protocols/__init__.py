"""Protocol roles as transport-free state machines: ``handle(message) -> messages``."""
