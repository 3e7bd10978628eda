import sys

from portcheck.cli import main

sys.exit(main())
