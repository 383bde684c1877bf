"""The functions a translated statement may call: Spanner SQL's, and the translator's own.

The engines have functions far beyond Spanner's, and some reach past txqueue's rules: on
PostgreSQL ``query_to_xml('select … from txqueue_event_config')`` runs a query given as a
string (past the reserved-name check), ``pg_read_file`` and ``lo_import`` read the server's
files, ``dblink`` opens connections, ``set_config`` changes settings. So every function call
in a statement is checked against this allow-list, and anything else is an InvalidArgument
naming the function.

The check runs on the translated tree, the one the engine's SQL is generated from: it sees
the functions the user wrote and those the translator added (``GEN_RANDOM_UUID``, SQLite's
``julianday`` …). A function sqlglot knows is a class of its own, which sqlglot renders as
that engine's counterpart (``FORMAT_TIMESTAMP`` is ``TO_CHAR`` on PostgreSQL): those are
allowed by class; any other call is an ``Anonymous`` node, rendered by its name as written,
and allowed only by name. On SQLite an authorizer checks the same at the engine as well
(``txqueue.drivers.sqlite.authorizer``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from txqueue.errors import InvalidArgument

__all__ = ["ALLOWED_CLASSES", "ALLOWED_NAMES", "check_functions"]


def _words(text: str) -> list[str]:
    """The whitespace-separated words of ``text``: long lists of names, kept readable."""
    return text.split()


#: Functions sqlglot knows (GoogleSQL's and Spanner's PostgreSQL dialect's), by class, and
#: the syntax sqlglot keeps as functions (AND, CASE, CAST, EXISTS, ``->``, ``@>`` …).
ALLOWED_CLASSES: frozenset[type[exp.Func]] = frozenset(
    getattr(exp, name)
    for name in _words(
        """
    And Or Xor Case If Cast TryCast Collate Exists Extract Unnest Explode Array Struct
    JSONBContains JSONBContainsTopKey JSONBContainsAnyTopKeys JSONBContainsAllTopKeys
    JSONBExtract JSONBExtractScalar ArrayContains ArrayContainsAll ArrayOverlaps
    AnyValue ArrayAgg ArrayConcatAgg Avg BitwiseAndAgg BitwiseOrAgg BitwiseXorAgg Count
    CountIf GroupConcat LogicalAnd LogicalOr Max Min Sum Stddev StddevSamp Variance
    First Last FirstValue LastValue NthValue Lag Lead Rank DenseRank PercentRank CumeDist
    Ntile RowNumber
    Abs Sign IsInf IsNan Sqrt Cbrt Pow Exp Ln Log Greatest Least SafeAdd SafeDivide
    SafeMultiply SafeNegate SafeSubtract Round Trunc Ceil Floor Cos Cosh Acos Acosh Sin
    Sinh Asin Asinh Tan Tanh Atan Atanh Atan2 Cot Degrees Radians Pi WidthBucket Rand
    FarmFingerprint SHA1Digest SHA2Digest MD5 MD5Digest
    ByteLength Length CodePointsToBytes CodePointsToString ToCodePoints Concat EndsWith
    StartsWith Format FromBase32 FromBase64 ToBase32 ToBase64 Hex LowerHex Unhex Pad Lower
    Upper Trim RegexpLike RegexpExtract RegexpExtractAll RegexpReplace Replace Repeat
    Reverse SafeConvertBytesToString Split SplitPart StrPosition Substring Soundex Left
    Right Ascii Chr Initcap Translate ToNumber
    JSONExtract JSONExtractArray JSONExtractScalar JSONValueArray JSONFormat ParseJSON
    JSONType JSONArray JSONObject JSONSet JSONRemove JSONStripNulls JSONKeysAtDepth
    JSONBool Int64 Float64 String LaxBool LaxInt64 LaxFloat64 LaxString JSONBObjectAgg
    ArrayConcat ArraySize ArrayToString ArrayFirst ArrayLast ArrayMin ArrayMax ArrayReverse
    ArraySlice ArrayAppend ArrayPrepend ArrayPosition GenerateSeries GenerateDateArray
    CurrentDate CurrentTimestamp Date DateAdd DateSub DateDiff DateTrunc DateFromUnixDate
    LastDay StrToDate StrToTime TimeToStr TsOrDsToDate TsOrDsToTimestamp Timestamp
    TimestampAdd TimestampSub TimestampDiff TimestampTrunc UnixToTime UnixDate UnixSeconds
    UnixMillis UnixMicros
    Coalesce Nullif Uuid
    """
    )
)

#: Functions sqlglot does not know, by lower-case name: Spanner's (both dialects) and those
#: the translator writes itself (``rewrite.py``).
ALLOWED_NAMES: frozenset[str] = frozenset(
    _words(
        """
    array_includes array_includes_all array_includes_any array_is_distinct ieee_divide
    json_contains offset ordinal safe_offset safe_ordinal pending_commit_timestamp
    array_lower array_upper cardinality every jsonb_agg jsonb_array_elements
    jsonb_array_elements_text jsonb_array_length jsonb_build_array jsonb_build_object
    jsonb_extract_path jsonb_extract_path_text jsonb_insert jsonb_object_keys jsonb_set
    jsonb_strip_nulls jsonb_typeof make_date octet_length regexp_match
    regexp_split_to_array to_jsonb
    gen_random_uuid julianday strftime date hex randomblob substr abs random lower json_each
    """
    )
)


def check_functions(tree: exp.Expression, where: Callable[[Any], str], dialect: Any) -> None:
    """InvalidArgument for the first function call in ``tree`` that is not allowed;
    ``dialect``: the sqlglot dialect the statement was written in (for its message)."""
    for node in tree.find_all(exp.Func):
        anonymous = isinstance(node, (exp.Anonymous, exp.AnonymousAggFunc))
        name = node.name if anonymous else _written(node, dialect)
        parent = node.parent
        if isinstance(parent, exp.Dot) and parent.expression is node:
            raise InvalidArgument(
                f"schema-qualified function {parent.this.sql()}.{name}() is not supported"
                f"{where(node)}: write the function's name alone"
            )
        if anonymous and name.lower() in ALLOWED_NAMES:
            continue
        if not anonymous and type(node) in ALLOWED_CLASSES:
            continue
        raise InvalidArgument(
            f"function {name}() is not supported{where(node)}: txqueue's SQL runs Spanner "
            "SQL's functions only (see docs/sql.md, 'What execute_sql is and is not')"
        )


def _written(node: exp.Func, dialect: Any) -> str:
    """How a known function reads in SQL (``VERSION``, not sqlglot's ``CURRENT_VERSION``)."""
    text = node.sql(dialect=dialect)
    return text.split("(", 1)[0].strip() if "(" in text else node.sql_name()
