import sys

from serve_bench.cli import main

sys.exit(main())
