"""The hot routes: what the front door serves with plain function calls, and how it reads their inputs.

A worker's loop (pop, complete, fail, extend) and a producer's push are most of what a queue
service answers. Through FastAPI each of them passes some ten ASGI layers, a router that tries the
routes in turn, and a dependency solver that resolves every parameter anew; under load that was a
third of the server's time (see bench/). A route is made hot where it is declared, by `@hot`
under its FastAPI decorator, and nowhere else:

    @router.post("/push", operation_id="push", ...)
    @hot
    async def push(body: PushRequest, sq: ServiceDep, who: Caller) -> Response: ...

The front door (simplequeue.api.front) then looks the method and path up in a small table
(`HotRoutes`, matched as Starlette's router would, with `compile_path`) and calls that same
function, with its inputs read from its signature in plain code (`hot_function`): the body
parsed and validated in one pass by pydantic-core, a query parameter through a TypeAdapter of its
declaration (type and constraints), path parameters as the path template converted them (and
validated so where the convertor does not give the declared type), each dependency (a function
of the request, such as the service and the caller) called as is.

What the plain reading does not accept is not answered here: it raises `Declined`, and the front
door hands the request to FastAPI, whose own reading answers it (a refusal with FastAPI's
messages in the error envelope, or a body only its parser takes), exactly as without the front
door; only those requests pay for both. tests/test_hot_routes.py holds the two paths to the same
answers. The declarations stay FastAPI's: the OpenAPI spec is written from them, and FastAPI serves
them when the front door does not (`QueueApi.serve_hot`).

Only public APIs are used: FastAPI's route declarations (path, methods, endpoint) and parameter
functions, Starlette's `compile_path` and convertors, pydantic's models, fields and TypeAdapters,
and `inspect` for the signatures.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin
from uuid import UUID

from fastapi import Depends, Path, Query
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from starlette.convertors import (
    Convertor,
    FloatConvertor,
    IntegerConvertor,
    PathConvertor,
    StringConvertor,
    UUIDConvertor,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, compile_path
from starlette.types import Scope

E = TypeVar("E", bound=Callable[..., Awaitable[Response]])

_MARK = "__simplequeue_hot__"
# The classes of FastAPI's parameter declarations, as its public functions make them.
_DEPENDS, _PATH, _QUERY = type(Depends()), type(Path()), type(Query())
_CONVERTED: dict[type[Convertor[Any]], type] = {
    UUIDConvertor: UUID,
    IntegerConvertor: int,
    FloatConvertor: float,
    StringConvertor: str,
    PathConvertor: str,
}
"""What each of Starlette's path convertors gives."""


def hot(endpoint: E) -> E:
    """Makes the route declared with `endpoint` hot: the front door serves it, calling `endpoint`
    itself. Its inputs must be what `hot_function` reads, and it must answer a Response."""
    setattr(endpoint, _MARK, True)
    return endpoint


def is_hot(route: BaseRoute) -> bool:
    return isinstance(route, APIRoute) and getattr(route.endpoint, _MARK, False) is True


class Declined(Exception):
    """An input the hot path does not read: FastAPI answers the request instead."""


def is_json(content_type: str) -> bool:
    """Whether FastAPI reads a body of this Content-Type as JSON: application/json, or
    application/<anything>+json, parameters ignored. (Answering no where FastAPI says yes costs
    only a Declined; the reverse would serve a body FastAPI refuses.)"""
    media = content_type.partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


@dataclass(slots=True)
class HotCall:
    """One request to a hot route, for its readers: the request, its whole body (the front door
    has read it) and its path parameters, converted by the route's path template
    ({item_id:uuid} -> a UUID; a path that does not convert is another route's)."""

    request: Request
    raw: bytes
    path: Mapping[str, Any]


HotFunction = Callable[[HotCall], Awaitable[Response]]
Reader = Callable[[HotCall], Any]
Dependency = Callable[[Request], Awaitable[Any]]


def _body(model: type[BaseModel]) -> Reader:
    def read(call: HotCall) -> BaseModel:
        if call.raw and is_json(call.request.headers.get("content-type", "")):
            try:
                return model.model_validate_json(call.raw)
            except ValidationError:
                pass
        raise Declined

    return read


def _query(name: str, adapter: TypeAdapter[Any], required: bool, default: Any) -> Reader:
    def read(call: HotCall) -> Any:
        text = call.request.query_params.get(name)  # the last, when it is given more than once
        if text is None:
            if required:
                raise Declined
            return default
        try:
            return adapter.validate_python(text)
        except ValidationError:
            raise Declined from None

    return read


def _path(name: str, annotation: Any, convertor: Convertor[Any]) -> Reader:
    """The value as the path template converted it, validated as FastAPI validates it: not at all
    where the template's convertor gives the parameter's type and nothing constrains it
    ({item_id:uuid} for a UUID)."""
    kind, declared = _declared(annotation)
    if kind is _CONVERTED.get(type(convertor)) and not getattr(declared, "metadata", None):
        return lambda call: call.path[name]
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)

    def read(call: HotCall) -> Any:
        try:
            return adapter.validate_python(call.path[name])
        except ValidationError:
            raise Declined from None

    return read


def _request(call: HotCall) -> Request:
    return call.request


def _later(call: HotCall) -> None:
    """A dependency's place among the arguments, filled after every input is read."""


def hot_function(route: APIRoute) -> HotFunction:
    """The route's endpoint, called with its inputs read from its signature: a path parameter, a
    query parameter (a scalar), one body (a pydantic model, the whole JSON body), the Request,
    a dependency that is an async function of the request alone; each declared with Annotated.
    Anything else is refused here, when the app is built, rather than read otherwise than FastAPI
    reads it."""
    endpoint = route.endpoint
    signature = inspect.signature(endpoint, eval_str=True)
    answer = signature.return_annotation
    if not (inspect.isclass(answer) and issubclass(answer, Response)):
        raise TypeError(f"{route.path}: a hot route answers a Response, not {answer}")
    in_path = compile_path(route.path)[2]
    inputs: list[Reader] = []  # one a parameter, in order (a dependency's: a placeholder)
    dependencies: list[tuple[int, Dependency]] = []
    bodies: list[str] = []
    for name, parameter in signature.parameters.items():
        where = f"{route.path}: parameter {name}"
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise TypeError(f"{where}: the hot path passes a route's parameters by position")
        if isinstance(parameter.default, FieldInfo | _DEPENDS):
            raise TypeError(f"{where}: declare it with Annotated, not as its default")
        kind, declared = _declared(parameter.annotation)
        required = parameter.default is inspect.Parameter.empty
        if isinstance(declared, _DEPENDS):
            dependencies.append((len(inputs), _of_the_request(where, declared.dependency)))
            inputs.append(_later)
        elif kind is Request and declared is None:
            inputs.append(_request)
        elif name in in_path and isinstance(declared, _PATH | None):
            inputs.append(_path(name, parameter.annotation, in_path[name]))
        elif inspect.isclass(kind) and issubclass(kind, BaseModel) and declared is None and required:
            if bodies:
                raise TypeError(f"{where}: a hot route reads one body (FastAPI would embed each)")
            bodies.append(name)
            inputs.append(_body(kind))
        elif (
            _scalar(kind) and isinstance(declared, _QUERY | None) and getattr(declared, "alias", None) is None
        ):
            adapter = TypeAdapter(parameter.annotation)  # with the declaration's constraints
            inputs.append(_query(name, adapter, required, parameter.default))
        else:
            raise TypeError(f"{where}: not an input the hot path reads")

    async def serve(call: HotCall) -> Response:
        # Every input first: a declined one leaves the whole answer to FastAPI, which reads the
        # body before it solves the dependencies (a 503 is not its answer to a body it cannot parse).
        arguments = [read(call) for read in inputs]
        for index, dependency in dependencies:
            arguments[index] = await dependency(call.request)
        response: Response = await endpoint(*arguments)
        return response

    return serve


def _declared(annotation: Any) -> tuple[Any, object | None]:
    """A parameter's type, and FastAPI's declaration of it (Depends, Path, Query...) if any."""
    if get_origin(annotation) is not Annotated:
        return annotation, None
    kind, *extras = get_args(annotation)
    declared = [extra for extra in extras if isinstance(extra, FieldInfo | _DEPENDS)]
    return kind, declared[-1] if declared else None


def _scalar(kind: Any) -> bool:
    """Not a model nor a collection: FastAPI reads a query parameter of such a type once."""
    options = get_args(kind) if get_origin(kind) in (Union, UnionType) else (kind,)
    return not any(
        get_origin(option) in (list, set, frozenset, tuple, dict)
        or (inspect.isclass(option) and issubclass(option, BaseModel | list | set | frozenset | tuple | dict))
        for option in options
    )


def _of_the_request(where: str, dependency: Any) -> Dependency:
    """A dependency the hot path calls as FastAPI would: an async function of the request alone."""
    parameters = list(inspect.signature(dependency, eval_str=True).parameters.values())
    if not inspect.iscoroutinefunction(dependency) or [p.annotation for p in parameters] != [Request]:
        raise TypeError(f"{where}: a hot route's dependency is an async function of the Request alone")
    return dependency  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class HotRoute:
    """A hot route as the front door matches it."""

    name: str  # its operation id
    method: str
    template: str  # the path as the access log and the metrics name it: /items/{item_id}
    pattern: re.Pattern[str]
    convertors: Mapping[str, Convertor[Any]]
    function: HotFunction


class HotRoutes:
    """The hot routes among `routes` by method and path: exact paths in a dict, the others by their
    template, matched and converted as Starlette's router would (`compile_path`)."""

    def __init__(self, routes: Iterable[BaseRoute]) -> None:
        self._exact: dict[tuple[str, str], HotRoute] = {}
        self._templated: list[HotRoute] = []
        for route in routes:
            if not is_hot(route):
                continue
            assert isinstance(route, APIRoute)
            function = hot_function(route)
            pattern, template, convertors = compile_path(route.path)
            for method in sorted(route.methods or ()):
                hot_route = HotRoute(
                    route.operation_id or route.name, method, template, pattern, convertors, function
                )
                if convertors:
                    self._templated.append(hot_route)
                else:
                    self._exact[method, route.path] = hot_route

    def __iter__(self) -> Iterator[HotRoute]:
        yield from self._exact.values()
        yield from self._templated

    def match(self, scope: Scope) -> tuple[HotRoute, dict[str, Any]] | None:
        method, path = scope["method"], scope["path"]
        route = self._exact.get((method, path))
        if route is not None:
            return route, {}
        for route in self._templated:
            if route.method == method and (found := route.pattern.match(path)):
                convert = route.convertors
                return route, {key: convert[key].convert(value) for key, value in found.groupdict().items()}
        return None
