import sys

from gclc.compiler.cli import main

sys.exit(main())
