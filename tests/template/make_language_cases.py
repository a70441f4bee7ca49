#!/usr/bin/env python3
"""Writes data/language_cases.jsonl: template snippets with the output Python
Jinja2 gives for them, configured as transformers configures it for chat
templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, json.dumps-based tojson, raise_exception, strftime_now).

Each row: {"name", "template", "vars", "expected"} or, where Jinja2 raises,
{"name", "template", "vars", "error": true}. template_test checks every row
against medq's C++ renderer. Regenerate with: python3 make_language_cases.py
(needs jinja2 3.1).
"""
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %} tag, as it renders when not tracking."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render", [], [])
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi  "},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"b": 2, "a": [1.5, "é"]}}}]},
    {"role": "tool", "content": "42"},
]

CASES = [
    # --- data, comments, whitespace control ---
    ("plain text", "hello world", {}),
    ("trailing newline dropped", "a\n", {}),
    ("only one trailing newline dropped", "a\n\n", {}),
    ("crlf normalized", "a\r\nb\rc", {}),
    ("comment", "a{# note #}b", {}),
    ("comment trims newline", "a{# note #}\nb", {}),
    ("comment lstrip", "a\n   {# note #}\nb", {}),
    ("comment minus", "a  {#- x -#}  b", {}),
    ("trim_blocks newline after block", "{% if true %}\nyes\n{% endif %}\nend", {}),
    ("lstrip_blocks indentation", "x\n    {% if true %}\n    y\n    {% endif %}\nz", {}),
    ("lstrip not for variables", "x\n    {{ 1 }}\n", {}),
    ("lstrip only whitespace prefix", "x {% if true %}y{% endif %}", {}),
    ("lstrip at start of template", "   {% if true %}y{% endif %}", {}),
    ("lstrip tabs", "a\n\t \t{% if true %}b{% endif %}", {}),
    ("plus disables lstrip", "a\n   {%+ if true %}b{% endif %}", {}),
    ("plus disables trim", "{% if true +%}\nb{% endif %}", {}),
    ("minus strips before", "a  \n  {%- if true %}b{% endif %}", {}),
    ("minus strips after", "{% if true -%}  \n\n  b{% endif %}", {}),
    ("var minus both", "a \n {{- 'x' -}} \n b", {}),
    ("var no trim_blocks", "{{ 'x' }}\nb", {}),
    ("delimiters inside strings", "{{ '}}' }}|{{ \"{{ x }}\" }}|{% set s = '%}' %}{{ s }}|{{ '{#' }}", {}),
    ("tags inside comments", "a{# {{ x }} {% if %} #}b", {}),
    ("lone braces are text", "{ a } {x} %} }} #}", {}),
    ("dict literal closes before var end", "{{ {'a': {'b': 1}}['a'] }}", {}),
    ("raw block", "{% raw %}{{ not evaluated }}{% if %}{% endraw %}", {}),
    ("raw block whitespace", "a\n  {% raw %}\n x \n  {% endraw %}\nb", {}),
    ("lstrip after var on same line", "{{ 1 }}   {% if true %}x{% endif %}", {}),
    ("block after trimmed newline strips indent", "{% set a = 1 %}\n   {% set b = 2 %}\n{{ a + b }}", {}),
    ("minus inside expression is minus", "{{ 5 -3 }}|{{ 5- 3}}", {}),
    # --- literals and printing ---
    ("print none", "{{ none }}|{{ None }}", {}),
    ("print bools", "{{ true }}|{{ False }}", {}),
    ("print ints and floats", "{{ 1 }}|{{ 1.0 }}|{{ 2.50 }}|{{ 1e3 }}|{{ 1e16 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 1_000 }}", {}),
    ("print float arithmetic", "{{ 0.1 + 0.2 }}|{{ 1/3 }}|{{ 10/2 }}|{{ 2**0.5 }}", {}),
    ("print list", "{{ [1, 'a', none, true, 1.5, [2]] }}", {}),
    ("print dict", "{{ {'a': 1, 'b': 'x'} }}", {}),
    ("print tuple as list-ish", "{{ (1, 2)|list }}", {}),
    ("print tuples", "{{ (1, 2) }} {{ (1,) }} {{ () }} {{ 1, 'a' }} {{ (1, 2) == [1, 2] }}", {}),
    ("repr quoting", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'tab\\there', 'nl\\n'] }}", {}),
    ("repr non printable", "{{ ['\\x00', '\\u00a0', '\\u200b', 'é'] }}", {}),
    ("string escapes", "{{ 'a\\tb\\\\c\\'d' }}|{{ \"\\u00e9\\x41\\101\" }}|{{ 'keep \\q' }}", {}),
    ("adjacent strings concatenate", "{{ 'a' 'b' \"c\" }}", {}),
    ("undefined prints empty", "[{{ nothing }}]", {}),
    ("unicode passthrough", "{{ s }}", {"s": "héllo → 世界 🙂"}),
    # --- expressions ---
    ("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {}),
    ("float floor division and modulo", "{{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}", {}),
    ("unary minus with filter", "{{ -3|abs }} {{ -(3|abs) }}", {}),
    ("concat tilde", "{{ 'a' ~ 1 ~ none ~ true ~ [1] }}", {}),
    ("string plus", "{{ 'a' + 'b' }}", {}),
    ("string times", "{{ 'ab' * 3 }}{{ [1] * 2 }}", {}),
    ("list plus", "{{ [1] + [2, 3] }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'a' }}", {}),
    ("chained comparison", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }}", {}),
    ("in and not in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 3 not in [3] }}", {}),
    ("and or return operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }}", {}),
    ("not binds looser than compare", "{{ not 1 == 2 }} {{ not x is defined }}", {}),
    ("conditional expression", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}]", {}),
    ("nested conditional", "{{ 'a' if x == 1 else 'b' if x == 2 else 'c' }}", {"x": 2}),
    ("truthiness", "{% for v in [0, 1, '', 'a', [], [0], {}, none, 0.0] %}{{ 'T' if v else 'F' }}{% endfor %}", {}),
    ("list and dict literals", "{{ [1, [2, 3], {'k': 'v'}][2]['k'] }} {{ {'a': {'b': 5}}.a.b }}", {}),
    ("trailing commas", "{{ [1, 2,] }} {{ {'a': 1,} }}", {}),
    # --- access ---
    ("attribute and item access", "{{ m.role }} {{ m['role'] }} {{ m.get('role') }} {{ m.get('x', 'dflt') }} {{ m.get('x') }}", {"m": {"role": "user"}}),
    ("missing attribute is undefined", "[{{ m.missing }}] {{ m.missing is defined }} {{ m['missing'] is undefined }}", {"m": {"role": "user"}}),
    ("none attribute is undefined", "[{{ n.x }}]", {"n": None}),
    ("list index", "{{ l[0] }} {{ l[-1] }} {{ l.1 }} [{{ l[10] }}]", {"l": ["a", "b", "c"]}),
    ("string index", "{{ s[0] }}{{ s[-1] }}", {"s": "héllo"}),
    ("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[5:] }}", {"l": [1, 2, 3, 4]}),
    ("string slices", "{{ s[::-1] }} {{ s[1:3] }} {{ s[:-1] }}", {"s": "héllo"}),
    ("dict methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys()|list }} {{ d.values()|list }}", {"d": {"b": 1, "a": 2}}),
    ("dict key named like method", "{{ d['items'] }}", {"d": {"items": "x"}}),
    # --- tests ---
    ("tests defined none", "{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ n is not none }}", {"x": 1, "n": None}),
    ("tests types", "{{ 's' is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ [] is mapping }}", {}),
    ("tests iterable sequence", "{{ [] is iterable }} {{ 's' is iterable }} {{ {} is iterable }} {{ 1 is iterable }} {{ 's' is sequence }} {{ {} is sequence }} {{ 1 is sequence }}", {}),
    ("tests boolean true false", "{{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}", {}),
    ("tests equalto and comparisons", "{{ 1 is equalto 1 }} {{ 2 is eq(3) }} {{ 3 is gt 2 }} {{ 3 is lt(2) }} {{ 2 is ge 2 }} {{ 'a' is in 'abc' }} {{ 2 is ne 2 }}", {}),
    ("tests odd even divisibleby", "{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 10 is divisibleby(3) }}", {}),
    ("tests lower upper", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }}", {}),
    ("test not", "{{ 1 is not string }} {{ not 1 is string }}", {}),
    ("tests callable", "{{ range is callable }} {{ 1 is callable }}", {}),
    # --- statements ---
    ("if elif else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %}", {}),
    ("for loop variables", "{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}", {}),
    ("for previtem nextitem", "{% for x in [1, 2, 3] %}({{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}){% endfor %}", {}),
    ("for else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}x{% else %}empty{% endfor %}", {}),
    ("for filter", "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %} {% for x in [1] if false %}{% else %}none{% endfor %}", {}),
    ("for filter loop length", "{% for m in msgs if m.role != 'system' %}{{ loop.index }}/{{ loop.length }} {% endfor %}", {"msgs": MSGS}),
    ("for tuple unpacking", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}{% for k, v in {'x': 1}|items %}{{ k }}{{ v }}{% endfor %}", {}),
    ("for over dict gives keys", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}", {}),
    ("for over undefined is empty", "{% for x in nothing %}x{% else %}e{% endfor %}", {}),
    ("nested loops and outer loop", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ b }} {% endfor %}{% endfor %}", {}),
    ("break and continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop cycle", "{% for x in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}", {}),
    ("range forms", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }}", {}),
    ("set and scoping", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}[{{ x }}]{% endfor %}{{ x }}", {}),
    ("set in if leaks", "{% if true %}{% set y = 'in' %}{% endif %}{{ y }}", {}),
    ("set tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("set shadows global", "{% set add_generation_prompt = false %}{{ add_generation_prompt }}", {"add_generation_prompt": True}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.count = ns.count + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", {}),
    ("namespace attribute missing", "[{{ namespace(a=1).b }}]", {}),
    ("block set", "{% set block %}\n  line {{ 1 + 1 }}\n{% endset %}[{{ block }}]", {}),
    ("block set with filter", "{% set x | upper %}abc{% endset %}{{ x }}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}", {}),
    ("macro missing argument is undefined", "{% macro m(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("macro sees globals", "{% macro m() %}{{ bos_token }}{% endmacro %}{{ m() }}", {"bos_token": "<s>"}),
    ("recursive macro", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("call block", "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inside{% endcall %}", {}),
    ("call block with args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}", {}),
    ("filter block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter indent(2, true) | trim %} x\ny {% endfilter %}", {}),
    ("with block", "{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}[{{ a }}]", {}),
    ("generation tag", "{% generation %}g{{ 1 }}{% endgeneration %}", {}),
    ("percent formatting", "{{ '%s-%d-%05.2f-%x-%r' % ('a', 3, 3.14159, 255, 'q') }}|{{ '%s' % [1, 2] }}|{{ '%(n)s!' % {'n': 'hi'} }}|{{ '100%%' % () }}|{{ '%-4s|%4s' % ('l', 'r') }}", {}),
    ("format filter", "{{ '%s and %s'|format('a', 'b') }} {{ '%(x)d'|format(x=5) }}", {}),
    ("percent format errors", "{{ '%s %s' % ('a',) }}", {}),
    # --- filters ---
    ("trim", "[{{ '  a b \\n'|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ none|trim }}]", {}),
    ("length and count", "{{ 'héllo'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ nothing|length }}", {}),
    ("upper lower title capitalize", "{{ 'hÉllo wOrld'|upper }} {{ 'HÉLLO'|lower }} {{ 'hello big-world (x'|title }} {{ 'hELLO wORLD'|capitalize }}", {}),
    ("default", "{{ nothing|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ nothing|d('short') }}", {}),
    ("join", "{{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ msgs|join('/', attribute='role') }}", {"msgs": MSGS}),
    ("replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }}", {}),
    ("first last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} [{{ []|first }}]", {}),
    ("list and items", "{{ 'ab'|list }} {{ {'a': 1}|items|list }} {{ nothing|items|list }}", {}),
    ("map attribute", "{{ msgs|map(attribute='role')|list }} {{ msgs|map(attribute='nope', default='-')|list }}", {"msgs": MSGS}),
    ("map filter", "{{ ['a', 'b']|map('upper')|join }} {{ [' a ', 'b ']|map('trim')|list }} {{ ['x']|map('replace', 'x', 'y')|list }}", {}),
    ("selectattr rejectattr", "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|rejectattr('content')|map(attribute='role')|list }} {{ msgs|selectattr('tool_calls', 'defined')|list|length }}", {"msgs": MSGS}),
    ("select reject", "{{ [0, 1, 2, 3]|select|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('divisibleby', 2)|list }}", {}),
    ("string int float abs", "{{ 12|string ~ 'x' }} {{ '42'|int + 1 }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.99|int }} {{ '2.5'|float }} {{ 'x'|float }} {{ -4|abs }} {{ -4.5|abs }} {{ '0x1A'|int(0, 16) }}", {}),
    ("safe and escape", "{{ '<b>'|safe }} {{ '<a href=\"x\">&\\''|escape }} {{ '<'|e }}", {}),
    ("indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}", {}),
    ("unique reverse", "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}", {}),
    ("sort", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ msgs|sort(attribute='role')|map(attribute='role')|list }}", {"msgs": MSGS}),
    ("dictsort", "{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}", {}),
    ("min max sum round", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }}", {}),
    ("attr filter", "{{ m|attr('role') }}", {"m": {"role": "user"}}),
    # --- tojson ---
    ("tojson scalars", "{{ 1|tojson }} {{ 1.0|tojson }} {{ 'a\"b\\\\'|tojson }} {{ none|tojson }} {{ true|tojson }} {{ 'é\\n\\t\\u0001'|tojson }}", {}),
    ("tojson keeps order and unicode", "{{ msgs|tojson }}", {"msgs": MSGS}),
    ("tojson indent", "{{ {'a': [1, {'b': []}], 'c': {}}|tojson(indent=2) }}", {}),
    ("tojson indent string", "{{ {'a': [1]}|tojson(indent='\\t') }}", {}),
    ("tojson ensure_ascii and sort_keys", "{{ {'b': 'é😀', 'a': 1}|tojson(ensure_ascii=true, sort_keys=true) }}", {}),
    ("tojson separators", "{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}", {}),
    ("tojson floats", "{{ [0.1, 1e-07, 1e22, 123.456, -0.0]|tojson }}", {}),
    # --- string methods ---
    ("strip methods", "[{{ '  x  '.strip() }}] [{{ '\\n\\nx\\n'.lstrip('\\n') }}] [{{ 'x\\n\\n'.rstrip() }}] [{{ 'abcx'.strip('ax') }}]", {}),
    ("startswith endswith", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('x') }}", {}),
    ("split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x</think>y'.split('</think>')[-1] }}", {}),
    ("upper lower title methods", "{{ 'abC'.upper() }} {{ 'ABc'.lower() }} {{ 'hello wORLD'.title() }} {{ 'hello'.capitalize() }}", {}),
    ("replace format methods", "{{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }} {{ '{} and {}'.format(1, 'x') }} {{ '{0}{0}{name}'.format('r', name='n') }} {{ '{{x}}'.format() }}", {}),
    ("misc str methods", "{{ 'a,b'.count(',') }} {{ 'héllo'.find('l') }} {{ '-'.join(['a', 'b']) }} {{ 'a\\nb'.splitlines() }} {{ '12'.isdigit() }} {{ ' '.isspace() }}", {}),
    ("str predicates", "{{ 'héllo'.isalpha() }} {{ 'a1'.isalpha() }} {{ ''.isalpha() }} {{ 'ABC'.isupper() }} {{ 'abc1'.islower() }} {{ '123'.islower() }} {{ 'Hello World'.istitle() if false else 'x' }}", {}),
    ("qwen style reasoning split", "{% set c = m.content %}{% if '</think>' in c %}{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[-1].lstrip('\\n') }}{% endif %}", {"m": {"content": "<think>\nplan\n</think>\n\nanswer"}}),
    # --- globals ---
    ("dict global", "{{ dict(a=1, b=2) }}", {}),
    ("raise_exception", "{% if true %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}", {}),
    # --- errors Jinja2 raises too ---
    ("undefined attribute of undefined", "{{ nothing.attr }}", {}),
    ("undefined plus", "{{ nothing + 1 }}", {}),
    ("type error plus", "{{ 'a' + 1 }}", {}),
    ("division by zero", "{{ 1 / 0 }}", {}),
    ("unknown filter", "{{ 1|nosuchfilter }}", {}),
    ("unknown test", "{{ 1 is nosuchtest }}", {}),
    ("syntax error", "{% if %}x{% endif %}", {}),
    ("unclosed block", "{% for x in y %}x", {}),
    ("unterminated string", "{{ 'abc }}", {}),
    ("unknown tag", "{% frobnicate %}", {}),
    ("list append refused", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("set attribute on dict refused", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("not iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("call non callable", "{{ 'abc'() }}", {}),
]


# Templates in the style of widely used models (written for these tests; the
# expected output comes from Jinja2, not from the models' documentation).
LLAMA31_STYLE = r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}

{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

MISTRAL_STYLE = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

GEMMA_STYLE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")

HERMES_STYLE = r"""{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec.items) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}

{{- bos_token }}
{{- '<|im_start|>system\n' }}
{{- "You are a function calling AI model. Here are the available tools: <tools> " }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\n\n" }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {%- if loop.first %}
            {{- "    Args:\n" }}
        {%- endif %}
        {{- "        " + param_name + "(" + json_to_python_type(param_fields) + "): " + param_fields.description|trim }}
    {%- endfor %}
    {{- '", "parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\n" }}
    {%- endif %}
{%- endfor %}
{{- " </tools>" }}
{{- '<|im_end|>\n' }}
{%- for message in messages %}
    {%- if message.role == "user" or message.role == "system" or (message.role == "assistant" and message.tool_calls is not defined) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
    {%- for tool_call in message.tool_calls %}
       {{- '\n<tool_call>\n' }}
           {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '{' }}
            {{- '"name": "' }}
            {{- tool_call.name }}
            {{- '"' }}
            {%- if tool_call.arguments is defined %}
                {{- ', ' }}
                {{- '"arguments": ' }}
                {{- tool_call.arguments|tojson }}
            {%- endif %}
            {{- '}' }}
            {{- '\n</tool_call>' }}
    {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>tool\n' }}
        {%- endif %}
        {{- '<tool_response>\n' }}
        {{- message.content }}
        {%- if not loop.last %}
            {{- '\n</tool_response>\n' }}
        {%- else %}
            {{- '\n</tool_response>' }}
        {%- endif %}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>' }}
        {%- elif loop.last %}
            {{- '<|im_end|>' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

GENERATION_STYLE = (
    "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
    "{{ eos_token }}{% endgeneration %}{% else %}[{{ m.role }}] {{ m.content }}\n{% endif %}{% endfor %}")

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_dose",
        "description": "Look up the usual adult dose of a drug. ",
        "parameters": {
            "type": "object",
            "properties": {
                "drug": {"type": "string", "description": " The drug name"},
                "weight_kg": {"type": "number", "description": "Patient weight"},
                "routes": {"type": "array", "items": {"type": "string"}, "description": "Routes"},
                "flags": {"type": ["string", "integer"], "description": "Flags"},
                "extra": {"type": "object", "additionalProperties": {"type": "boolean"},
                          "description": "Extra"},
            },
            "required": ["drug"],
        },
        "return": {"type": "integer"},
    },
}]

CONVERSATIONS = {
    "system and user": [
        {"role": "system", "content": "  You are careful.  "},
        {"role": "user", "content": "Dose of vancomycin?"},
    ],
    "multi turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Explain\tQT prolongation.\n"},
    ],
    "tool call": [
        {"role": "user", "content": "Dose for 70 kg?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "get_dose", "arguments": {"drug": "vancomycin", "weight_kg": 70.0}}}]},
        {"role": "tool", "content": "15-20 mg/kg"},
        {"role": "tool", "content": "{\"max\": 2000}"},
    ],
    "bad alternation": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ],
}

for tmpl_name, tmpl in [("llama3.1-style", LLAMA31_STYLE), ("mistral-style", MISTRAL_STYLE),
                        ("gemma-style", GEMMA_STYLE), ("hermes-style", HERMES_STYLE),
                        ("generation-tag", GENERATION_STYLE)]:
    for conv_name, conv in CONVERSATIONS.items():
        for with_tools in (False, True):
            if with_tools and tmpl_name not in ("llama3.1-style", "hermes-style"):
                continue
            variables = {"messages": conv, "bos_token": "<s>", "eos_token": "</s>",
                         "add_generation_prompt": conv_name != "tool call",
                         "tools": TOOLS if with_tools else None, "date_string": "21 Nov 2026"}
            suffix = " with tools" if with_tools else ""
            CASES.append((f"{tmpl_name}: {conv_name}{suffix}", tmpl, variables))


def main():
    env = make_env()
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                            "language_cases.jsonl")
    names = set()
    with open(out_path, "w", encoding="utf-8") as out:
        for name, template, variables in CASES:
            assert name not in names, name
            names.add(name)
            row = {"name": name, "template": template, "vars": variables}
            try:
                row["expected"] = env.from_string(template).render(**variables)
            except Exception:  # noqa: BLE001 - any Jinja2 failure means "error"
                row["error"] = True
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(CASES)} cases to {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
