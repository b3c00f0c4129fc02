"""Bundled legacy (Harn-style) peers, so `reminder-bridge demo` and the tests have something real to proxy."""
