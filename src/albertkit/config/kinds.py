"""Config fields whose values the registry decides: a model size, and the sections chosen by
``kind`` (``data``, ``optimizer``).

A section chosen by kind is validated in two steps: its ``kind`` first (the registry says
which config class owns it), then that class validates the section, so its errors name its
own fields (``data.rows``). The JSON Schema lists the classes registered when the schema is
made. No model class is changed for this: the registry is read each time.

Example:
    >>> from pydantic import BaseModel
    >>> class Holder(BaseModel):
    ...     optimizer: Annotated[RegisteredSection, RegisteredKind("optimizer")]
    >>> Holder(optimizer={"kind": "adamw", "beta_2": 0.98}).optimizer.beta_2
    0.98
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import PydanticCustomError, PydanticKnownError, core_schema

from albertkit.config import registry

# Type checkers see a section chosen by kind as Any: its class is known at run time only.
RegisteredSection = Any


class RegisteredSize:
    """Pydantic marker of a string that must name a registered size; its JSON Schema lists
    the sizes registered when the schema is made."""

    @staticmethod
    def choices() -> list[str]:
        return registry.size_names()

    def _check(self, value: str) -> str:
        known = self.choices()
        if value not in known:
            listed = ", ".join(repr(n) for n in known[:-1]) + f" or {known[-1]!r}"
            raise ValueError(f"Input should be {listed}; {registry.missing_hint('size', value)}")
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return {"enum": self.choices(), "type": "string"}


SizeName = Annotated[str, RegisteredSize()]


class RegisteredKind:
    """Pydantic marker of a section chosen by ``kind`` among the config classes registered in
    ``category`` (``Annotated[Any, RegisteredKind("data kind")]``).

    Validation: a registered class's instance is kept as it is; a mapping must hold a
    registered ``kind`` (the errors are pydantic's own tagged-union errors), and the class
    registered for it validates the mapping. The JSON Schema is the tagged union of the
    classes registered when it is made.
    """

    def __init__(self, category: registry.Category) -> None:
        self.category = category

    def classes(self) -> dict[str, type[BaseModel]]:
        """The config class of every registered kind (plugins loaded first)."""
        registry.load_plugins()
        return {k: e.value for k, e in registry.entries(self.category).items()}

    def _validate(self, value: Any) -> BaseModel:
        classes = {k: e.value for k, e in registry.entries(self.category).items()}
        if isinstance(value, tuple(classes.values())):
            return value
        if isinstance(value, BaseModel):  # another class's section: validate its fields
            value = value.model_dump()
        if not isinstance(value, dict):
            raise PydanticKnownError("model_attributes_type")
        if "kind" not in value:
            raise PydanticKnownError("union_tag_not_found", {"discriminator": "'kind'"})
        kind = value["kind"]
        cls = classes.get(kind) if isinstance(kind, str) else None
        if cls is None:
            tags = ", ".join(repr(k) for k in classes)
            hint = registry.missing_hint(self.category, str(kind))
            raise PydanticCustomError(
                "union_tag_invalid",
                "Input tag '{tag}' found using {discriminator} does not match any of the "
                "expected tags: {expected_tags}; {hint}",
                {"discriminator": "'kind'", "tag": str(kind), "expected_tags": tags,
                 "hint": hint})
        return cls.model_validate(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        union = core_schema.tagged_union_schema(
            {k: cls.__pydantic_core_schema__ for k, cls in self.classes().items()},
            discriminator="kind")
        return handler(union)
