#!/usr/bin/env python3
"""LangChain and LiteLLM, unchanged, against a running medqd: structured
output and tool calls as agent and extraction code drives them.

  clients_test.py --base-url http://127.0.0.1:PORT/v1 --model MODEL

- LangChain (langchain-openai): with_structured_output of a Pydantic model
  by json_schema and by function_calling, and bind_tools with a named
  tool_choice: the answers are instances of the model, the tool call's
  args keep its schema.
- LiteLLM: completion with a Pydantic response_format, and with tools and
  tool_choice required (one call, parallel_tool_calls false) and named.
Exit 0: passed; 77: skipped (a client not installed); else failed.
"""

import argparse
import json
import os
import sys
from typing import Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
try:
    import jsonschema
    import litellm
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, Field
except ImportError as e:
    print(f"MEDQ-SKIPPED: {e.name} is not installed (scripts/setup-http-tests)")
    sys.exit(77)


class Vitals(BaseModel):
    """A patient's vitals, as read from a note."""
    hr: int = Field(ge=30, le=200, description="heart rate per minute")
    sex: Literal["female", "male", "unknown"]
    febrile: bool


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print("ok:", what)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    note = "Pulse 72, a woman, no fever."

    llm = ChatOpenAI(base_url=args.base_url, api_key="none", model=args.model, max_tokens=120,
                     max_retries=0, timeout=300)
    for method in ("json_schema", "function_calling"):
        vitals = llm.with_structured_output(Vitals, method=method).invoke(note)
        check(isinstance(vitals, Vitals), f"LangChain with_structured_output({method}): {vitals!r}")
    message = llm.bind_tools([Vitals], tool_choice="Vitals").invoke(note)
    calls = message.tool_calls
    check(len(calls) == 1 and calls[0]["name"] == "Vitals", f"LangChain bind_tools: {calls}")
    Vitals.model_validate(calls[0]["args"])

    common = dict(model="openai/" + args.model, api_base=args.base_url, api_key="none",
                  max_tokens=120, messages=[{"role": "user", "content": note}])
    r = litellm.completion(response_format=Vitals, **common)
    Vitals.model_validate_json(r.choices[0].message.content)
    check(r.choices[0].finish_reason == "stop", f"LiteLLM response_format: {r.choices[0].message.content}")
    tool = {"type": "function", "function": {"name": "record", "parameters": Vitals.model_json_schema()}}
    for choice in ("required", {"type": "function", "function": {"name": "record"}}):
        r = litellm.completion(tools=[tool], tool_choice=choice, parallel_tool_calls=False, **common)
        calls = r.choices[0].message.tool_calls or []
        check(r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and
              calls[0].function.name == "record", f"LiteLLM tool_choice {choice}: {calls}")
        jsonschema.validate(json.loads(calls[0].function.arguments), Vitals.model_json_schema())
    print("all passed")


if __name__ == "__main__":
    main()
