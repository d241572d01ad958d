"""Form pieces every evalhub admin uses: strict JSON, secret-safe re-rendering, every constraint checked.

The rules themselves live on the models (docs/DESIGN.md principle 2). What this module adds is what a
*form* must do around them so that no input gives a 500 and no secret goes back to the browser:

* :class:`StrictJSONField` refuses ``NaN``, ``Infinity`` and ``1e309`` as a form error
  (docs/failure-modes.md B9: Django's ``forms.JSONField`` accepts them and the save then fails
  with an IntegrityError or DataError, a 500);
* :class:`SecretSafeFormMixin` blanks, in the re-rendered form, every submitted value that holds
  a secret shape, puts back the instance's stored values for those fields (the change page
  prints ``str(obj)`` in its title and breadcrumbs, and ``construct_instance`` has already copied
  the posted value onto ``obj``), and redacts error messages that quote input (a choice
  field's "X is not one of the available choices");
* the same mixin validates *every* model constraint against the instance, not only those whose
  fields are all on the form, so a ``list_editable`` changelist or an inline cannot skip one
  and reach the database (docs/failure-modes.md B7);
* :class:`CheckedActionsMixin`, part of both admin mixins below, answers a changelist action
  posted with selected ids that are not rows' ids (``_selected_action=abc``) with a message
  saying so, never a 500; :func:`check_every_admins_actions` mixes it into the admins other apps
  register on the site (django.contrib.auth's, django-q2's, django-axes').
"""

from __future__ import annotations

from typing import Any

from adminsortable2.admin import SortableAdminMixin
from django import forms
from django.contrib import messages
from django.contrib.admin import AdminSite, helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db import models, transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Lower, Upper
from django.forms.fields import InvalidJSONInput, JSONString

from evalhub.jsonio import loads_strict
from evalhub.secrets import contains_secret, redact
from evalhub.validation import REORDER_OFFSET


class StrictJSONField(forms.JSONField):
    """A ``forms.JSONField`` that parses with :func:`evalhub.jsonio.loads_strict`.

    ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow to infinity are refused with
    "Enter valid JSON (NaN is not allowed in JSON: use a finite number)." and so is text holding
    ``\u0000`` (PostgreSQL cannot store it). The messages never quote the submitted text.
    """

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values:
            return None
        if isinstance(value, (list, dict, int, float, JSONString)):
            return value
        try:
            converted = loads_strict(value)
        except ValueError as exc:
            # JSONDecodeError says where ("Expecting value: line 1 column 5 (char 4)"), loads_strict
            # what ("NaN is not allowed in JSON: use a finite number"); neither quotes the input.
            raise ValidationError("Enter valid JSON (%(reason)s).", code="invalid", params={"reason": exc}) from None
        if _has_nul(converted):
            # PostgreSQL's jsonb refuses \u0000 (a DataError, so a 500), as CharField's validator refuses NUL.
            raise ValidationError("Enter valid JSON without the NUL character (\\u0000).", code="null_characters_not_allowed")
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return loads_strict(data)
        except ValueError:
            return InvalidJSONInput(data)


class EnvironmentNamesField(StrictJSONField):
    """Environment variable *names* as a person types them: ``OPENAI_API_KEY``, ``A, B`` or one
    per line; a JSON list (``["A", "B"]``) still works. Shown back as ``A, B``. The names
    themselves are checked by the model (pattern, uniqueness, no secret values)."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, InvalidJSONInput):
            return value
        if isinstance(value, str):
            try:
                value = loads_strict(value)
            except ValueError:
                return value
        if isinstance(value, list) and all(isinstance(name, str) for name in value):
            return ", ".join(value)
        return super().prepare_value(value)

    @staticmethod
    def _typed_as_names(value: Any) -> bool:
        """True for ``A, B`` text; JSON (a list, an object, a string, a number, a literal such as
        ``null`` or ``NaN``) goes to the strict JSON parser, blank stays blank (not a list)."""
        if not isinstance(value, str) or not value.strip():
            return False
        text = value.strip()
        if text.startswith(("[", "{", '"')) or text in ("null", "true", "false", "NaN", "Infinity", "-Infinity"):
            return False
        try:
            float(text)
        except ValueError:
            return True
        return False

    def to_python(self, value: Any) -> Any:
        if self._typed_as_names(value):
            return value.replace(",", " ").split()
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self._typed_as_names(data):
            return data
        return super().bound_data(data, initial)

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial if initial is not None else [])
        except ValidationError:
            return True


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


class JSONTextarea(forms.Textarea):
    """A monospace textarea sized for short JSON lists and objects."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"rows": 3, "cols": 60, "class": "vLargeTextField evalhub-json", **(attrs or {})})


#: ``formfield_overrides`` for every evalhub admin: JSON is parsed strictly.
JSON_FORMFIELD_OVERRIDES = {models.JSONField: {"form_class": StrictJSONField, "widget": JSONTextarea}}


class SecretSafeFormMixin:
    """Mixed into every admin form (``forms.Form`` or ``ModelForm``); see the module docstring.

    ``constraint_exclude`` names fields whose constraints the whole-instance check skips: the
    candidate inline under Slot skips ``position`` because its formset checks positions among
    the submitted rows and the admin saves a reorder through an offset (a swap is legal there).
    """

    constraint_exclude: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = getattr(self, "instance", None)
        # The stored values, to put back where a secret was posted (construct_instance overwrites them).
        self._stored_values = (
            {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields} if instance is not None else {}
        )

    def _post_clean(self) -> None:
        super()._post_clean()
        instance = getattr(self, "instance", None)
        if instance is not None and not self._errors:
            self._validate_every_constraint(instance)
        if self.is_bound:
            self._hide_secrets()

    def _validate_every_constraint(self, instance: models.Model) -> None:
        try:
            instance.validate_constraints(exclude=set(self.constraint_exclude))
        except ValidationError as exc:
            for field, errors in exc.error_dict.items():
                self.add_error(field if field in self.fields else None, errors)

    def _hide_secrets(self) -> None:
        prefix = f"{self.prefix}-" if self.prefix else ""
        secret_keys = [key for key in self.data if key.startswith(prefix) and contains_secret(_values(self.data, key))]
        if secret_keys:
            data = self.data.copy()
            for key in secret_keys:
                data[key] = ""
            self.data = data
            # A widget posts under its name, a multi-widget under name_0, name_1, ...
            names = {
                name
                for name in self.fields
                for key in secret_keys
                if key == self.add_prefix(name) or key.startswith(self.add_prefix(name) + "_")
            }
            self._restore_stored_values(names)
            for name in names:
                if name not in self._errors:
                    # A secret in a field that otherwise validated must not be saved silently.
                    self.add_error(name, ValidationError("This looks like a secret; it was not kept.", code="secret_shaped"))
        self._redact_errors()

    def _restore_stored_values(self, names: set[str]) -> None:
        instance = getattr(self, "instance", None)
        if instance is None:
            return
        for field in instance._meta.concrete_fields:
            if field.name in names:
                setattr(instance, field.attname, self._stored_values[field.attname])

    def _redact_errors(self) -> None:
        for name, errors in list((self._errors or {}).items()):
            messages = [str(message) for message in errors]
            cleaned = [redact(message) for message in messages]
            if cleaned != messages:
                self._errors[name] = self.error_class(
                    cleaned, error_class="nonfield" if name == NON_FIELD_ERRORS else None, renderer=self.renderer
                )


def _values(data: Any, key: str) -> list[Any]:
    return data.getlist(key) if hasattr(data, "getlist") else [data[key]]


class SecretSafeModelForm(SecretSafeFormMixin, forms.ModelForm):
    """The default form of every evalhub ``ModelAdmin`` and inline."""


class _Unsupported(Exception):
    """An expression :func:`_expression_value` cannot evaluate in Python."""


def _expression_value(instance: models.Model, expression: Any) -> Any:
    """The value a unique-constraint expression takes for ``instance``: a field name, ``F()``,
    ``Lower()`` and ``Upper()`` (the expressions evalhub's constraints use)."""
    if isinstance(expression, str | F):
        name = expression if isinstance(expression, str) else expression.name
        return getattr(instance, instance._meta.get_field(name).attname)
    if isinstance(expression, Lower | Upper):
        value = _expression_value(instance, expression.get_source_expressions()[0])
        if not isinstance(value, str):
            return value
        return value.lower() if isinstance(expression, Lower) else value.upper()
    raise _Unsupported(expression)


def expression_constraint_key(instance: models.Model, constraint: models.UniqueConstraint) -> tuple[Any, ...] | None:
    """The tuple an expression ``UniqueConstraint`` (``Lower("model")``) compares for ``instance``,
    or ``None`` when the constraint does not bind it (a NULL part, a condition, an expression
    evaluated only by the database)."""
    if not constraint.expressions or constraint.condition is not None:
        return None
    try:
        key = tuple(_expression_value(instance, expression) for expression in constraint.expressions)
    except _Unsupported:
        return None
    return None if any(part is None for part in key) else key


class ConstraintCheckedFormSetMixin:
    """Checks the model's expression ``UniqueConstraint``s among the rows submitted together.

    Each form checks every constraint against the database (:class:`SecretSafeFormMixin`), but two
    rows of one save that both take the same value (``gpt-5.9`` and ``GPT-5.9`` in one slot) each
    pass that check and the second insert fails with an ``IntegrityError``, a 500. Django's formset
    compares rows only on constraints over plain fields all present on the form; this compares
    the expression ones, and puts the constraint's own message on the later row.
    """

    def clean(self) -> None:
        super().clean()  # type: ignore[misc]
        constraints = [c for c in self.model._meta.constraints if isinstance(c, models.UniqueConstraint) and c.expressions]  # type: ignore[attr-defined]
        seen: set[tuple[str, tuple[Any, ...]]] = set()
        for form in self.forms:  # type: ignore[attr-defined]
            if not form.is_valid() or (self.can_delete and self._should_delete_form(form)):  # type: ignore[attr-defined]
                continue
            for constraint in constraints:
                key = expression_constraint_key(form.instance, constraint)
                if key is None:
                    continue
                if (constraint.name, key) in seen:
                    form.add_error(None, ValidationError(constraint.get_violation_error_message(), code="unique"))
                seen.add((constraint.name, key))


class ConstraintCheckedModelFormSet(ConstraintCheckedFormSetMixin, forms.BaseModelFormSet):
    """The ``list_editable`` changelist's formset."""


class CheckedActionsMixin:
    """A ModelAdmin whose changelist actions check the selected ids before running.

    Django filters the changelist by the posted ``_selected_action`` values as they are, and a
    value the primary key cannot hold (``abc``, a number past the column's range, a NUL in a text
    key on PostgreSQL) raises ``ValueError`` there: a 500. A value Python reads as another row's
    id (``１``, ``01``, `` 1``: ``int()`` takes them all as 1) would run the action on that row.
    Here such a post runs no action and goes back to the changelist with an error naming the
    values (redacted, at most three) and what an id is. With "select all" (``select_across``)
    Django ignores the ids, and so does this check.
    """

    #: The most refused ids the message quotes, and the most characters of each.
    QUOTED_IDS = 3
    QUOTED_LENGTH = 40

    def get_changelist_instance(self, request: Any) -> Any:
        """Django's changelist, or :class:`IncorrectLookupParameters` (its "?e=1" redirect, as for
        ``?run=abc``) when the query's lookup holds a number SQLite cannot bind.

        Django checks an integer column's range in a lookup (``?id=10**20`` lists nothing) but not
        a foreign key's (``?run=10**20``, ``?slot=10**20``): SQLite's driver raises
        ``OverflowError`` when the list is counted, a 500 on every list with a foreign key."""
        try:
            return super().get_changelist_instance(request)  # type: ignore[misc]
        except OverflowError as exc:
            raise IncorrectLookupParameters(exc) from None

    def response_action(self, request: Any, queryset: QuerySet) -> Any:
        """Django's ``response_action``, or ``None`` (the changelist shows the message) when a
        selected id is not one the primary key holds."""
        select_across = forms.BooleanField(required=False).to_python(request.POST.get("select_across"))
        refused = [] if select_across else self.refused_ids(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))
        if not refused:
            # An id that is well formed but not in the list (a row deleted since the list was shown,
            # ``-1``): Django runs the action on nothing and says nothing; say so.
            selected = [] if select_across else request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
            found = {str(pk) for pk in queryset.filter(pk__in=selected).values_list("pk", flat=True)} if selected else set()
            missing = [value for value in dict.fromkeys(selected) if value not in found]
            response = super().response_action(request, queryset)  # type: ignore[misc]
            if missing:
                self.message_user(  # type: ignore[attr-defined]
                    request,
                    f"No {self.model._meta.verbose_name} {self._quoted(missing)} in this list (deleted since the list was "  # type: ignore[attr-defined]
                    f"shown, or outside its filters): nothing was done for {'it' if len(missing) == 1 else 'them'}.",
                    messages.WARNING,
                )
            return response
        self.message_user(  # type: ignore[attr-defined]
            request,
            f"Not the id of a {self.model._meta.verbose_name}: {self._quoted(refused)}. Select rows with the "  # type: ignore[attr-defined]
            "checkboxes of this list and run the action again. Nothing was changed.",
            messages.ERROR,
        )
        return None

    def _quoted(self, values: list[str]) -> str:
        """At most :attr:`QUOTED_IDS` of ``values``, each redacted and cut, and how many more."""
        quoted = ", ".join(repr(redact(value[: self.QUOTED_LENGTH])) for value in values[: self.QUOTED_IDS])
        return quoted + (f" and {len(values) - self.QUOTED_IDS} more" if len(values) > self.QUOTED_IDS else "")

    def refused_ids(self, selected: list[str]) -> list[str]:
        """The values of ``selected`` that are not an id as the list's checkboxes send it
        (``str(obj.pk)``): those the primary key's ``to_python`` refuses or its validators (an
        integer key's range for the database in use, a text key's length) reject, those holding
        a NUL (no database row does: PostgreSQL refuses it in a query), and those that are
        another spelling of an id (``１``, ``01``, ``+1``)."""
        pk = self.model._meta.pk  # type: ignore[attr-defined]
        refused = []
        for value in selected:
            try:
                ProhibitNullCharactersValidator()(value)
                python_value = pk.to_python(value)
                pk.run_validators(python_value)
            except ValidationError:
                refused.append(value)
                continue
            if str(python_value) != value:
                refused.append(value)
        return refused


def check_every_admins_actions(site: AdminSite) -> None:
    """Mix :class:`CheckedActionsMixin` into every ``ModelAdmin`` registered on ``site`` that does
    not have it: the admins of other apps (django.contrib.auth's users and groups, django-q2's
    tasks, schedules and queue, django-axes' attempts and logs) filter by the posted ids as they
    are, so ``_selected_action=abc`` is a 500 there too. Each keeps its own class, options and
    actions; only the id check is added. Called once every admin module is imported
    (``evalhub.apps.EvalhubConfig.ready``); ``tests/test_admin_third_party.py`` checks the site."""
    for model, model_admin in list(site._registry.items()):
        if isinstance(model_admin, CheckedActionsMixin):
            continue
        base = type(model_admin)
        checked = type(base.__name__, (CheckedActionsMixin, base), {"__module__": base.__module__, "__qualname__": base.__qualname__})
        site.unregister(model)
        site.register(model, checked)


class EvalhubAdminMixin(CheckedActionsMixin):
    """Strict JSON and secret-safe forms on the add/change views *and* the list_editable changelist."""

    form = SecretSafeModelForm
    formfield_overrides = JSON_FORMFIELD_OVERRIDES

    def get_changelist_form(self, request: Any, **kwargs: Any) -> type[forms.ModelForm]:
        # Django's default builds the changelist form from plain ModelForm, not ``self.form``.
        kwargs.setdefault("form", self.form)
        return super().get_changelist_form(request, **kwargs)  # type: ignore[misc]

    def get_changelist_formset(self, request: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("formset", ConstraintCheckedModelFormSet)
        return super().get_changelist_formset(request, **kwargs)  # type: ignore[misc]

    def get_formset(self, request: Any, obj: Any = None, **kwargs: Any) -> Any:
        """An inline's formset (only inlines have this method), with the rows checked together."""
        base = kwargs.get("formset", self.formset)  # type: ignore[attr-defined]
        if not issubclass(base, ConstraintCheckedFormSetMixin):
            kwargs["formset"] = type(f"ConstraintChecked{base.__name__}", (ConstraintCheckedFormSetMixin, base), {})
        return super().get_formset(request, obj, **kwargs)  # type: ignore[misc]


class ReadOnlyAdminMixin(CheckedActionsMixin):
    """History is immutable (docs/DESIGN.md principle 3): view, never add, change or delete.
    (Its actions — cancel, re-run — check their selected ids, :class:`CheckedActionsMixin`.)"""

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class OffsetSortableAdminMixin(SortableAdminMixin):
    """django-admin-sortable2's drag-and-drop changelist for a model whose position is unique.

    The library writes the new positions with one ``bulk_update``; PostgreSQL and SQLite check a
    unique constraint row by row, so moving A into B's place fails while B still holds it. Here
    the moved rows first jump above :data:`~evalhub.validation.REORDER_OFFSET` (as the manifest
    import does) and then take their new positions, in one transaction: a clash with a row that
    was not moved rolls everything back and the library answers 400, never 500. The library's
    "move to page" actions (several rows at once, positions shifted by ``F() + 1``) are not
    offered: the line-ups fit on one page.
    """

    def _update_order(self, updated_items: Any, extra_model_filters: dict[str, Any]) -> int:
        field = self.default_order_field
        moves: dict[int, int] = {}
        for pk, order in updated_items:
            order = int(order)
            if not 0 <= order < REORDER_OFFSET:
                raise ValueError(f"position {order} is out of range")
            moves[int(pk)] = order
        queryset = self.model.objects.filter(**extra_model_filters)
        with transaction.atomic():
            queryset.filter(pk__in=moves).update(**{field: F(field) + REORDER_OFFSET})
            for pk, order in moves.items():
                queryset.filter(pk=pk).update(**{field: order})
        return len(moves)

    def get_actions(self, request: Any) -> dict[str, Any]:
        actions = super().get_actions(request)
        for name in ("move_to_first_page", "move_to_back_page", "move_to_forward_page", "move_to_last_page", "move_to_exact_page"):
            actions.pop(name, None)
        return actions


def renumber_positions(queryset: QuerySet, *, field: str = "position") -> None:
    """Give the rows of ``queryset`` positions 0..n-1 in their current order, without a clash.

    A row at or above ``REORDER_OFFSET`` (moved out of the way before a formset save) counts at
    ``position - REORDER_OFFSET``; ties go to the older row. Two ``bulk_update`` passes: first
    to ``2 * REORDER_OFFSET + i`` (above every current value), then to ``i``.
    """
    rows = list(queryset)

    def effective(row: models.Model) -> tuple[int, int]:
        value = getattr(row, field)
        return (value - REORDER_OFFSET if value >= REORDER_OFFSET else value, row.pk)

    rows.sort(key=effective)
    model = queryset.model
    for base in (2 * REORDER_OFFSET, 0):
        for index, row in enumerate(rows):
            setattr(row, field, base + index)
        model.objects.bulk_update(rows, [field])
