"""content query|insert|update|delete|gettype on content://settings/{system,secure,global}.

As AOSP's frameworks/base/cmds/content (Content.java) with SettingsProvider behind it
(packages/SettingsProvider/.../SettingsProvider.java): the same store as `settings` (t_settings).
* Arguments are parsed by Content.Parser; a bad one prints its USAGE, then `[ERROR] MESSAGE`, on
  stdout. The tool always exits 0 (Content.main returns normally), also when the provider throws:
  then stderr gets `Error while accessing provider:AUTHORITY` and the exception.
* query prints each row as `Row: N col=value, col=value` (NULL for a null value), or
  `No result found.`; columns are _id, name, value (SettingsProvider.ALL_COLUMNS) or the
  --projection given (colon-separated; an unknown one: "Invalid column: X").
* --where must be `name='X'` / `name="X"` (optionally in brackets): SettingsProvider.Arguments
  accepts nothing else ("Supported SQL: ..."); a 2-segment uri (content://settings/secure/X)
  names the setting itself.
* update takes the setting from --where and its value from the `value` binding, and changes
  nothing unless a `name` binding is given too (SettingsProvider.update checks
  values.getAsString(NAME)) and the setting exists.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import t_settings

AUTHORITY = "settings"
COLUMNS = ("_id", "name", "value")
BIND_TYPES = frozenset("bsilfdnBSILFDN")
# SettingsProvider.Arguments' patterns for a where clause without parameters.
WHERE_NAME = re.compile(r"""\s*(?:\(\s*name\s*=\s*['"].*['"]\s*\)|name\s*=\s*['"].*['"])\s*""", re.DOTALL)
WHERE_PARAM = re.compile(r"\s*(?:\(\s*name\s*=\s*\?\s*\)|name\s*=\s*\?)\s*")
USAGE = (
    "usage: adb shell content [subcommand] [options]\n"
    "\n"
    "usage: adb shell content insert --uri <URI> [--user <USER_ID>] --bind <BINDING> [--bind <BINDING>...]"
    " [--extra <BINDING>...]\n"
    "  <URI> a content provider URI.\n"
    "  <BINDING> binds a typed value to a column and is formatted:\n"
    "  <COLUMN_NAME>:<TYPE>:<COLUMN_VALUE> where:\n"
    "  <TYPE> specifies data type such as:\n"
    "  b - boolean, s - string, i - integer, l - long, f - float, d - double, n - null\n"
    "  Note: Omit the value for passing an empty string, e.g column:s:\n"
    "\n"
    "usage: adb shell content update --uri <URI> [--user <USER_ID>] [--where <WHERE>]"
    " [--extra <BINDING>...]\n"
    "\n"
    "usage: adb shell content delete --uri <URI> [--user <USER_ID>] --bind <BINDING> [--bind <BINDING>...]"
    " [--where <WHERE>] [--extra <BINDING>...]\n"
    "\n"
    "usage: adb shell content query --uri <URI> [--user <USER_ID>] [--projection <PROJECTION>]"
    " [--where <WHERE>] [--sort <SORT_ORDER>] [--extra <BINDING>...]\n"
    "  <PROJECTION> is a list of colon separated column names and is formatted:\n"
    "  <COLUMN_NAME>[:<COLUMN_NAME>...]\n"
    "\n"
    "usage: adb shell content gettype --uri <URI> [--user <USER_ID>]\n"
    "\n"
)


class UsageError(Exception):
    """Content.Parser's IllegalArgumentException: usage on stdout, then [ERROR]."""


class ProviderError(Exception):
    """An exception thrown by the provider (or while finding it): stderr, exit 0."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(f"{java_class}: {message}")


@dataclass(frozen=True)
class Request:
    verb: str
    uri: str
    projection: tuple[str, ...] | None
    where: str | None
    values: dict[str, str | None]


def _bind(argument: str | None) -> tuple[str, str | None]:
    """COLUMN:TYPE:VALUE, colons escaped with a backslash (Content.Parser.splitWithEscaping)."""
    if not argument:
        raise UsageError(f"Binding not well formed: {argument}")
    parts, cur, i = [], [], 0
    while i < len(argument):
        c = argument[i]
        if c == "\\":
            i += 1
            if i == len(argument):
                raise UsageError("Invalid escaping")
            cur.append(argument[i])
        elif c == ":":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    if len(parts) != 3:
        raise UsageError(f"Binding not well formed: {argument}")
    column, kind, value = parts
    if kind not in BIND_TYPES:
        raise UsageError(f"Unsupported type: {kind}")
    if kind in "nN":
        return column, None
    if kind in "bB":
        return column, "true" if value.lower() == "true" else "false"  # Boolean.parseBoolean
    if kind in "ilIL":
        try:
            return column, str(int(value))
        except ValueError:
            raise UsageError(f'For input string: "{value}"') from None
    if kind in "fdFD":
        try:
            return column, repr(float(value))
        except ValueError:
            raise UsageError(f'For input string: "{value}"') from None
    return column, value


def parse(args: list[str]) -> Request:
    if not args or args[0] not in ("insert", "delete", "update", "query", "gettype"):
        raise UsageError(f"Unsupported operation: {args[0] if args else 'null'}")
    verb, rest = args[0], iter(args[1:])
    allowed = {
        "insert": {"--uri", "--user", "--bind", "--extra"},
        "delete": {"--uri", "--user", "--where", "--extra"},
        "update": {"--uri", "--user", "--where", "--bind", "--extra"},
        "query": {"--uri", "--user", "--where", "--sort", "--projection", "--extra"},
        "gettype": {"--uri", "--user"},
    }[verb]
    uri = where = None
    projection: tuple[str, ...] | None = None
    values: dict[str, str | None] = {}
    for argument in rest:
        if argument not in allowed:
            raise UsageError(f"Unsupported argument: {argument}")
        if argument in ("--bind", "--extra"):
            column, value = _bind(next(rest, None))
            if argument == "--bind":
                values[column] = value
            continue
        value = next(rest, None)
        if not value or value.startswith("--"):
            raise UsageError(f"No value for argument: {argument}")
        if argument == "--uri":
            uri = value
        elif argument == "--where":
            where = value
        elif argument == "--projection":
            projection = tuple(re.split(r"\s*:\s*", value))
        elif argument == "--user" and not value.lstrip("-").isdigit():
            raise UsageError(f'For input string: "{value}"')
    if uri is None:
        raise UsageError("Content provider URI not specified. Did you specify --uri argument?")
    if verb in ("insert", "update") and not values:
        raise UsageError("Bindings not specified. Did you specify --bind argument(s)?")
    return Request(verb, uri, projection, where, values)


def _table_and_name(request: Request, *, support_all: bool) -> tuple[str, str | None]:
    """SettingsProvider.Arguments: the table and the setting a uri and where clause name."""
    segments = [s for s in request.uri.removeprefix(f"content://{AUTHORITY}").split("/") if s]
    if not segments:
        raise ProviderError("java.lang.IllegalArgumentException", f"Invalid URI:{request.uri}")
    table = segments[0]
    if table not in t_settings.NAMESPACES:
        raise ProviderError("java.lang.IllegalArgumentException", f"Bad root path: {table}")
    where = request.where
    if len(segments) == 1:
        if where is not None and WHERE_PARAM.fullmatch(where):
            # The content tool passes no selection arguments: whereArgs.length on null.
            raise ProviderError("java.lang.NullPointerException", "Attempt to get length of null array")
        if where is not None and WHERE_NAME.fullmatch(where):
            start = max(where.find("'"), where.find('"')) + 1
            end = max(where.rfind("'"), where.rfind('"'))
            return table, where[start:end]
        if support_all and where is None:
            return table, None
    elif len(segments) == 2 and where is None:
        return table, segments[1]
    raise ProviderError(
        "java.lang.IllegalArgumentException",
        "Supported SQL:\n"
        "  uri content://some_table/some_property with null where and where args\n"
        "  uri content://some_table with query name=? and single name as arg\n"
        "  uri content://some_table with query name=some_name and null args\n"
        f"  but got - uri:{request.uri}, where:{where} whereArgs:null",
    )


def _authority(request: Request) -> str:
    """Uri.getAuthority(), printed as Java prints a null."""
    if not request.uri.startswith("content://"):
        return "null"
    return request.uri.removeprefix("content://").split("/")[0]


def _query(request: Request) -> list[str]:
    table, name = _table_and_name(request, support_all=True)
    columns = request.projection or COLUMNS
    for column in columns:
        if column not in COLUMNS:
            raise ProviderError("java.lang.IllegalArgumentException", f"Invalid column: {column}")
    values = t_settings.load(table)
    names = sorted(values) if name is None else [name] if name in values else []
    ids = {key: str(i + 1) for i, key in enumerate(sorted(values))}
    lines = []
    for row, key in enumerate(names):
        cells = {"_id": ids[key], "name": key, "value": values[key]}
        text = ", ".join(f"{c}={'NULL' if cells[c] is None else cells[c]}" for c in columns)
        lines.append(f"Row: {row} {text}")
    return lines or ["No result found."]


def _change(request: Request) -> None:
    if request.verb == "insert":
        table = _table_and_name(Request("query", request.uri, None, None, {}), support_all=True)[0]
        name = request.values.get("name")
        if name:
            t_settings.put(table, name, request.values.get("value"))
        return
    table, target = _table_and_name(request, support_all=False)
    if not target:
        return
    if request.verb == "delete":
        t_settings.delete(table, target)
    elif request.values.get("name") and target in t_settings.load(table):
        t_settings.put(table, target, request.values.get("value"))


def content(args: list[str]) -> int:
    try:
        request = parse(args)
    except UsageError as error:
        sys.stdout.write(f"{USAGE}\n[ERROR] {error}\n")
        return 0
    try:
        if _authority(request) != AUTHORITY:
            raise ProviderError(
                "java.lang.IllegalStateException", f"Could not find provider: {_authority(request)}"
            )
        if request.verb == "query":
            sys.stdout.write("".join(f"{line}\n" for line in _query(request)))
        elif request.verb == "gettype":
            table, name = _table_and_name(Request("query", request.uri, None, None, {}), support_all=True)
            kind = "dir" if not name else "item"
            sys.stdout.write(f"Result: vnd.android.cursor.{kind}/{table}\n")
        else:
            _change(request)
    except ProviderError as error:
        sys.stderr.write(f"Error while accessing provider:{_authority(request)}\n{error}\n")
    return 0
