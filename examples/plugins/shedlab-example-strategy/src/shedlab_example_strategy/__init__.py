"""An example shedlab strategy plugin (see ``hottest.py`` and ``docs/strategies.md``)."""

from shedlab_example_strategy.hottest import HottestBrokerShedder

__all__ = ["HottestBrokerShedder"]
