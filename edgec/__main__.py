import sys

from edgec.cli.main import main

sys.exit(main())
