# Validates JSON lines (files given after the schema) against a JSON Schema (draft 2020-12);
# used by tests/cli/decode.rs on every `roce decode --json` line it produces.
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
bad = 0; n = 0
for path in sys.argv[2:]:
    for i, line in enumerate(open(path)):
        n += 1
        errs = list(v.iter_errors(json.loads(line)))
        if errs:
            bad += 1
            if bad <= 5:
                print(f"{path}:{i+1}: {errs[0].json_path}: {errs[0].message[:300]}")
print(f"{n} lines, {bad} invalid")
sys.exit(1 if bad or n == 0 else 0)
