# -*- coding: utf-8 -*-
"""AWX survey specs checked the way AWX checks them, for the tests and tests/integration.

``validate_spec`` applies the rules of AWX's survey spec endpoint
(``JobTemplateSurveySpec._validate_spec_data`` in awx/api/views): name, description (strings)
and spec (a non-empty list); each question a dict with type, question_name, variable (strings)
and required (a boolean); variables unique; type one of AWX's question types; a default of the
type's Python type; min/max integers; choices for multiplechoice/multiselect, the default among
them (one for multiplechoice). It adds what a launch would reject: a default outside min/max.

``answers`` builds the extra vars AWX sends when an operator accepts the defaults and gives
``overrides``, refusing answers that a launch would refuse.
"""

from __future__ import annotations

import re

ALLOWED_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                 "integer": int, "float": (float, int)}
VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SurveyError(ValueError):
    pass


def choices_of(question):
    choices = question.get("choices")
    if isinstance(choices, str):
        return [c for c in choices.splitlines() if c.strip()]
    return list(choices or [])


def validate_spec(spec):
    for field, kind, label in (("name", str, "string"), ("description", str, "string"), ("spec", list, "list of items")):
        if field not in spec:
            raise SurveyError("Field '%s' is missing from survey spec." % field)
        if not isinstance(spec[field], kind):
            raise SurveyError("Expected %s for field '%s', received %s type." % (label, field, type(spec[field]).__name__))
    if not spec["spec"]:
        raise SurveyError("'spec' doesn't contain any items.")
    seen = set()
    for idx, item in enumerate(spec["spec"]):
        if not isinstance(item, dict):
            raise SurveyError("Survey question %d is not a json object." % idx)
        for field in ("type", "question_name", "variable", "required"):
            if field not in item:
                raise SurveyError("'%s' missing from survey question %d" % (field, idx))
            kind = bool if field == "required" else str
            if not isinstance(item[field], kind):
                raise SurveyError("'%s' in survey question %d expected to be %s." % (field, idx, kind.__name__))
        if not VARIABLE_RE.match(item["variable"]):
            raise SurveyError("'variable' %r in survey question %d is not a variable name" % (item["variable"], idx))
        if item["variable"] in seen:
            raise SurveyError("'variable' '%s' duplicated in survey question %d." % (item["variable"], idx))
        seen.add(item["variable"])
        qtype = item["type"]
        if qtype not in ALLOWED_TYPES:
            raise SurveyError("'%s' in survey question %d is not one of '%s' allowed question types."
                              % (qtype, idx, ", ".join(ALLOWED_TYPES)))
        default = item.get("default", "")
        if default != "" and (not isinstance(default, ALLOWED_TYPES[qtype]) or isinstance(default, bool)):
            raise SurveyError("Default value %r in survey question %d expected to be %s." % (default, idx, qtype))
        for key in ("min", "max"):
            if item.get(key) is not None and (not isinstance(item[key], int) or isinstance(item[key], bool)):
                raise SurveyError("The %s limit in survey question %d expected to be integer." % (key, idx))
        if qtype in ("multiplechoice", "multiselect"):
            if "choices" not in item:
                raise SurveyError("Survey question %d of type %s must specify choices." % (idx, qtype))
            choices = choices_of(item)
            defaults = [d for d in (default.splitlines() if isinstance(default, str) else default) if d.strip()]
            if qtype == "multiplechoice" and len(defaults) > 1:
                raise SurveyError("Multiple Choice (Single Select) can only have one default value.")
            if any(d not in choices for d in defaults):
                raise SurveyError("Default choice must be answered from the choices listed.")
        check_answer(item, default, idx, default_only=True)
    return True


def check_answer(item, value, idx=0, default_only=False):
    """What a launch refuses: a required answer missing, text length or number outside min/max,
    a choice not listed."""
    qtype = item["type"]
    if value == "" or value is None:
        if item["required"] and not default_only:
            raise SurveyError("'%s' value missing" % item["variable"])
        return
    low, high = item.get("min"), item.get("max")
    if qtype in ("text", "textarea", "password"):
        if low is not None and len(value) < low or high is not None and len(value) > high:
            raise SurveyError("'%s' value %r is not %s to %s characters long (question %d)" % (item["variable"], value, low, high, idx))
    elif qtype in ("integer", "float"):
        if low is not None and value < low or high is not None and value > high:
            raise SurveyError("'%s' value %r is not between %s and %s (question %d)" % (item["variable"], value, low, high, idx))
    elif qtype == "multiplechoice" and value not in choices_of(item):
        raise SurveyError("'%s' value %r is not one of %s" % (item["variable"], value, choices_of(item)))


def answers(spec, overrides=None):
    """The extra vars of a launch that takes the defaults, with ``overrides`` answered."""
    overrides = dict(overrides or {})
    known = set(q["variable"] for q in spec["spec"])
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise SurveyError("no survey question for %s (questions: %s)" % (", ".join(unknown), ", ".join(sorted(known))))
    result = {}
    for idx, item in enumerate(spec["spec"]):
        value = overrides.get(item["variable"], item.get("default", ""))
        check_answer(item, value, idx)
        if value == "" and not item["required"]:
            continue  # AWX leaves unanswered optional questions out of the extra vars
        result[item["variable"]] = value
    return result
