"""Random JSON schemas for the structured-output tests.

Every schema is one the server must honour exactly; lengths are bounded (maxLength, maxItems,
integer ranges, enums) because the test model has random weights: it knows nothing, so only
the constraint makes its output valid, and only the bounds make it end within max_tokens.
"""
import random

STRING_FORMATS = ["date", "uuid", "ipv4", "date-time"]


def _string(r: random.Random) -> dict:
    kind = r.choice(["len", "len", "enum", "format", "pattern", "const"])
    if kind == "len":
        lo = r.randint(0, 3)
        return {"type": "string", "minLength": lo, "maxLength": lo + r.randint(0, 6)}
    if kind == "enum":
        return {"type": "string", "enum": r.sample(["red", "green", "blue", "a \"quoted\" word", "naïve", "日本", ""], r.randint(1, 4))}
    if kind == "format":
        return {"type": "string", "format": r.choice(STRING_FORMATS)}
    if kind == "pattern":
        return {"type": "string", "pattern": r.choice(["^[a-z]{1,4}$", "^[A-Z][0-9]{2}$", "^(yes|no|maybe)$", "^\\d{3}-\\d{2}$"])}
    return {"const": r.choice(["fixed", "x", "Ω"])}


def _integer(r: random.Random) -> dict:
    lo = r.randint(-1000, 1000)
    s = {"type": "integer", "minimum": lo, "maximum": lo + r.randint(0, 5000)}
    if r.random() < 0.3:
        s["exclusiveMinimum"] = s.pop("minimum")
    return s


def _number(r: random.Random) -> dict:
    lo = r.randint(-50, 50)
    s = {"type": "number", "minimum": lo, "maximum": lo + r.randint(1, 100)}
    if r.random() < 0.3:
        s["exclusiveMaximum"] = s.pop("maximum")
    return s


def _leaf(r: random.Random) -> dict:
    pick = r.random()
    if pick < 0.35:
        return _string(r)
    if pick < 0.55:
        return _integer(r)
    if pick < 0.7:
        return _number(r)
    if pick < 0.8:
        return {"type": "boolean"}
    if pick < 0.85:
        return {"type": "null"}
    if pick < 0.93:
        return {"enum": r.sample([1, 2.5, "two", None, True, [1, 2], {"k": "v"}], r.randint(1, 3))}
    return {"anyOf": [_integer(r), {"type": "null"}]}


def _object(r: random.Random, depth: int) -> dict:
    names = r.sample(["id", "name", "count", "ok", "tags", "when", "score", "kind", "meta", "x"], r.randint(1, 4))
    props = {n: random_schema(r, depth + 1) for n in names}
    required = [n for n in names if r.random() < 0.7]
    s = {"type": "object", "properties": props, "required": required}
    if r.random() < 0.5:
        s["additionalProperties"] = False
    return s


def _array(r: random.Random, depth: int) -> dict:
    lo = r.randint(0, 2)
    return {"type": "array", "items": random_schema(r, depth + 1), "minItems": lo, "maxItems": lo + r.randint(0, 2)}


def random_schema(r: random.Random, depth: int = 0) -> dict:
    if depth >= 2:
        return _leaf(r)
    pick = r.random()
    if depth == 0 or pick < 0.3:
        return _object(r, depth)
    if pick < 0.5:
        return _array(r, depth)
    return _leaf(r)


def schema_with_ref(r: random.Random) -> dict:
    """A schema whose properties go through $defs."""
    item = _object(r, 1)
    return {"$defs": {"item": item}, "type": "object",
            "properties": {"first": {"$ref": "#/$defs/item"}, "rest": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 2}},
            "required": ["first", "rest"], "additionalProperties": False}


def schemas(count: int, seed: int = 1234) -> list:
    r = random.Random(seed)
    out = []
    for i in range(count):
        out.append(schema_with_ref(r) if i % 10 == 9 else random_schema(r))
    return out


if __name__ == "__main__":
    # The same schemas for the C++ mask benchmark: python3 structured_schemas.py 200 > schemas.json
    import json
    import sys
    print(json.dumps(schemas(int(sys.argv[1]) if len(sys.argv) > 1 else 200)))
