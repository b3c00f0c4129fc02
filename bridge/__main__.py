"""`python -m bridge` runs the same CLI as the `reminder-bridge` console script."""
from bridge.cli import main

raise SystemExit(main())
