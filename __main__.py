import sys

from gclc.cli.main import main

sys.exit(main())
