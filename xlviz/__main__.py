from xlviz.cli import main

raise SystemExit(main())
