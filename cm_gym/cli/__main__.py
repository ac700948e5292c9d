import sys

from cm_gym.cli import main

sys.exit(main())
