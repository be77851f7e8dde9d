from toposched.cli import main

raise SystemExit(main())
