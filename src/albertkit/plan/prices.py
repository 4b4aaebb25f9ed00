"""What SageMaker training instances cost per hour: a dated table in the package, which a
file overrides; never fetched at run time.

The table (:data:`ON_DEMAND_USD_PER_HOUR`) holds the on-demand prices AWS listed for
SageMaker *training* instances in us-east-1 during 2024, transcribed into albertkit on
2026-12-07 without a live check (:data:`PRICES_AS_OF`, :data:`PRICES_SOURCE`). Prices change
and differ by region: for a decision, put today's figures in a file
(``albertkit plan --prices FILE``; :meth:`PriceTable.with_file`). Types whose price was not
known with confidence (p4de, p5e/p5en, g6, g6e) are left out: the plan then says so and
prints hours only.

Spot: SageMaker's managed spot training bills the spot price, which moves by type, zone and
hour ("up to 90%" below on demand, AWS says). Without a per-type spot figure the table
assumes :data:`SPOT_DISCOUNT` below on demand. An interruption stops every instance of the
job; SageMaker restarts it on new capacity and training resumes from the last checkpoint,
so each interruption costs the steps since that checkpoint (half a checkpoint interval on
average) plus the restart (:data:`SPOT_RESTART_MINUTES`). How often one instance is
interrupted is an assumption too (:data:`SPOT_HOURS_BETWEEN_INTERRUPTIONS`, per instance);
a job of ``n`` instances is interrupted ``n`` times as often.

A price file is YAML or JSON; every key is optional and what it names wins::

    as_of: 2026-12-07
    source: AWS price list, us-east-1, SageMaker training
    on_demand:            # USD per instance-hour
      ml.p4d.24xlarge: 37.688
    spot:                 # USD per instance-hour (else on demand x (1 - spot_discount))
      ml.p4d.24xlarge: 13.2
    spot_discount: 0.7
    spot_hours_between_interruptions: 24
    spot_restart_minutes: 15

Example:
    >>> table = PriceTable.packaged()
    >>> table.on_demand("ml.p3dn.24xlarge")
    35.894
    >>> round(table.spot("ml.p3dn.24xlarge"), 3)  # 70% below on demand
    10.768
    >>> table.on_demand("ml.p5e.48xlarge") is None  # not in the table: give it in a file
    True
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albertkit.errors import ConfigError

PRICES_AS_OF = "2024 (transcribed 2026-12-07)"
PRICES_SOURCE = ("AWS's published on-demand prices of SageMaker training instances, "
                 "us-east-1, USD per instance-hour (not checked live)")
PRICES_REGION = "us-east-1"

# USD per instance-hour, SageMaker training, on demand, us-east-1.
ON_DEMAND_USD_PER_HOUR: dict[str, float] = {
    "ml.p3.2xlarge": 3.825,
    "ml.p3.8xlarge": 14.688,
    "ml.p3.16xlarge": 28.152,
    "ml.p3dn.24xlarge": 35.894,
    "ml.p4d.24xlarge": 37.688,
    "ml.p5.48xlarge": 113.068,
    "ml.g4dn.xlarge": 0.736,
    "ml.g4dn.2xlarge": 0.94,
    "ml.g4dn.4xlarge": 1.505,
    "ml.g4dn.8xlarge": 2.72,
    "ml.g4dn.12xlarge": 4.89,
    "ml.g4dn.16xlarge": 5.44,
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06,
    "ml.g5.12xlarge": 7.09,
    "ml.g5.16xlarge": 4.096,
    "ml.g5.24xlarge": 10.18,
    "ml.g5.48xlarge": 20.36,
}
SPOT_DISCOUNT = 0.70  # spot price = on demand x (1 - SPOT_DISCOUNT) without a per-type figure
SPOT_HOURS_BETWEEN_INTERRUPTIONS = 24.0  # per instance: an assumption, state your own
SPOT_RESTART_MINUTES = 15.0  # new capacity, container start and checkpoint restore

_FILE_KEYS = ("as_of", "source", "on_demand", "spot", "spot_discount",
              "spot_hours_between_interruptions", "spot_restart_minutes")


@dataclass(frozen=True)
class PriceTable:
    """On-demand and spot prices (USD per instance-hour) and the spot assumptions.

    ``on_demand_prices``/``spot_prices`` map instance types to prices; ``spot_discount``
    prices spot for the types without a spot figure; ``as_of`` and ``source`` say where the
    figures come from (printed with every plan).
    """

    on_demand_prices: dict[str, float] = field(default_factory=dict)
    spot_prices: dict[str, float] = field(default_factory=dict)
    spot_discount: float = SPOT_DISCOUNT
    spot_hours_between_interruptions: float = SPOT_HOURS_BETWEEN_INTERRUPTIONS
    spot_restart_minutes: float = SPOT_RESTART_MINUTES
    as_of: str = PRICES_AS_OF
    source: str = PRICES_SOURCE

    @classmethod
    def packaged(cls) -> PriceTable:
        """The table shipped in the package (:data:`ON_DEMAND_USD_PER_HOUR`)."""
        return cls(on_demand_prices=dict(ON_DEMAND_USD_PER_HOUR))

    def on_demand(self, instance_type: str) -> float | None:
        """USD per hour of one ``instance_type`` on demand; ``None`` when not known."""
        return self.on_demand_prices.get(instance_type)

    def spot(self, instance_type: str) -> float | None:
        """USD per hour on spot: the type's own figure, else on demand less the discount."""
        if instance_type in self.spot_prices:
            return self.spot_prices[instance_type]
        price = self.on_demand(instance_type)
        return None if price is None else price * (1.0 - self.spot_discount)

    def with_file(self, path: str | Path) -> PriceTable:
        """This table with what the price file at ``path`` names (YAML or JSON) put over it;
        errors name the file and the key."""
        path = Path(path)
        raw = read_mapping_file(path, "--prices", "a price file")
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: not a price file: expected a mapping of "
                              f"{', '.join(_FILE_KEYS)}")
        unknown = sorted(set(raw) - set(_FILE_KEYS))
        if unknown:
            raise ConfigError(f"{path}: unknown key {unknown[0]!r}; a price file has "
                              f"{', '.join(_FILE_KEYS)}")
        changes: dict[str, Any] = {}
        for key in ("on_demand", "spot"):
            if key in raw:
                prices = _price_map(raw[key], path, key)
                mine = self.on_demand_prices if key == "on_demand" else self.spot_prices
                changes[f"{key}_prices"] = {**mine, **prices}
        for key in ("spot_discount", "spot_hours_between_interruptions", "spot_restart_minutes"):
            if key in raw:
                changes[key] = _number(raw[key], path, key)
        if not 0.0 <= changes.get("spot_discount", 0.0) < 1.0:
            raise ConfigError(f"{path}: spot_discount={raw['spot_discount']!r} is not in [0, 1)")
        if changes.get("spot_hours_between_interruptions", 1.0) <= 0:
            raise ConfigError(f"{path}: spot_hours_between_interruptions="
                              f"{raw['spot_hours_between_interruptions']!r} must be above 0")
        changes["as_of"] = str(raw.get("as_of", f"{self.as_of}; {path.name}: no date"))
        changes["source"] = str(raw.get("source", f"{path} over {self.source}"))
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Where the prices come from and the spot assumptions (for JSON output)."""
        return {
            "as_of": self.as_of,
            "source": self.source,
            "currency": "USD",
            "spot_discount": self.spot_discount,
            "spot_hours_between_interruptions": self.spot_hours_between_interruptions,
            "spot_restart_minutes": self.spot_restart_minutes,
        }


def read_mapping_file(path: Path, flag: str, what: str, hint: str = "") -> Any:
    """The parsed YAML (or ``.json``) file at ``path``; one-line errors naming ``flag``,
    the file and ``what`` it should be."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        tail = f"; {hint}" if hint else ""
        raise ConfigError(f"{flag} {path}: cannot read it ({e.strerror or e}){tail}") from None
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        import yaml

        return yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - JSON's and YAML's parse errors alike
        raise ConfigError(f"{path}: not {what}: {str(e).splitlines()[0]}") from None


def _number(value: Any, path: Path, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{path}: {key}={value!r} is not a non-negative number")
    return float(value)


def _price_map(value: Any, path: Path, key: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {key} must map instance types to USD per hour")
    return {str(k): _number(v, path, f"{key}.{k}") for k, v in value.items()}
