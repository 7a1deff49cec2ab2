# ruff: noqa: F401 - the imports are the point: they are made available to the function under test
"""Common imports: the fixed preamble of the non-agentic level 2 (functional-memorization paper, App. C).

The paper names "standard-library packages such as numpy, pandas and os"; this list is calib's choice.
Each import is guarded, so a package missing where the function runs (numpy, pandas and scipy are not
on the sandbox's path) leaves its name unbound instead of failing the preamble.
"""

try:
    import os
except ImportError:
    pass
try:
    import sys
except ImportError:
    pass
try:
    import re
except ImportError:
    pass
try:
    import math
except ImportError:
    pass
try:
    import json
except ImportError:
    pass
try:
    import random
except ImportError:
    pass
try:
    import itertools
except ImportError:
    pass
try:
    import functools
except ImportError:
    pass
try:
    import collections
except ImportError:
    pass
try:
    import string
except ImportError:
    pass
try:
    import time
except ImportError:
    pass
try:
    import datetime
except ImportError:
    pass
try:
    import copy
except ImportError:
    pass
try:
    import heapq
except ImportError:
    pass
try:
    import bisect
except ImportError:
    pass
try:
    import operator
except ImportError:
    pass
try:
    import statistics
except ImportError:
    pass
try:
    import hashlib
except ImportError:
    pass
try:
    import base64
except ImportError:
    pass
try:
    import struct
except ImportError:
    pass
try:
    import io
except ImportError:
    pass
try:
    import csv
except ImportError:
    pass
try:
    import logging
except ImportError:
    pass
try:
    import textwrap
except ImportError:
    pass
try:
    import unicodedata
except ImportError:
    pass
try:
    import decimal
except ImportError:
    pass
try:
    import fractions
except ImportError:
    pass
try:
    import enum
except ImportError:
    pass
try:
    import dataclasses
except ImportError:
    pass
try:
    import typing
except ImportError:
    pass
try:
    import pathlib
except ImportError:
    pass
try:
    from collections import Counter, OrderedDict, defaultdict, deque, namedtuple
except ImportError:
    pass
try:
    from dataclasses import dataclass, field
except ImportError:
    pass
try:
    from datetime import date, timedelta
except ImportError:
    pass
try:
    from functools import lru_cache, partial, reduce
except ImportError:
    pass
try:
    from pathlib import Path
except ImportError:
    pass
try:
    from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union
except ImportError:
    pass
try:
    import numpy as np
except ImportError:
    pass
try:
    import pandas as pd
except ImportError:
    pass
try:
    import scipy
except ImportError:
    pass
