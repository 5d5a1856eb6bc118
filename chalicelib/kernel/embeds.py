"""Which references are embedded in responses, as the contract lists them (and as the platform's
Python SDK models read them): ``project.organization.id``, ``assistant.project.id``,
``product.productGroup.name``, ...

``EMBEDS[family path]`` names references of that family (keys of ``Family.references``: the
object is named after the id field without ``Id``). A response then carries, next to ``xId``,
``x``: the referenced record as its own GET returns it, less the target family's ``HEAVY``
fields (none of them is always present, so the object still matches the target's <Entity>
schema). kernel/embedding.py fetches them (one BatchGetItem per response or page).
"""
from __future__ import annotations

from chalicelib.kernel.registry import BY_PATH

EMBEDS: dict[str, tuple[str, ...]] = {
    # named by the contract
    'projects': ('organization', 'owner', 'status'),
    'assistants': ('project',),
    'products': ('productGroup',),
    'product-project-templates': ('product',),
    'knowledge-set-sources': ('contentObject', 'knowledgeSet'),
    'knowledge-sets': ('organization', 'project'),
    # read by the SDK's models (kodexa.model): Task.project/assignee, Membership.organization/user,
    # Message.channel/user, ProjectStatus.organization (required there), KnowledgeFeature.featureType,
    # KnowledgeItem.knowledgeItemType
    'tasks': ('project', 'assignee'),
    'memberships': ('organization', 'user'),
    'messages': ('channel', 'user'),
    'project-statuses': ('organization',),
    'knowledge-features': ('featureType',),
    'knowledge-items': ('knowledgeItemType',),
}

# Fields left out of an embedded record (large or configuration-only; never required).
HEAVY: dict[str, tuple[str, ...]] = {
    'organizations': ('memory', 'features', 'properties', 'authGroupLink'),
    'projects': ('dataFlow', 'options', 'memory', 'documentStatuses', 'notes'),
    'users': ('preferences', 'security', 'userStorage', 'groupsJson', 'rolesJson', 'image', 'bio'),
    'content-objects': ('contentMetadata', 'metadata', 'documentTaxonValidations', 'source', 'summary'),
    'knowledge-sets': ('features', 'knowledgeItems', 'featureExpression'),
    'products': ('overviewMarkdown',),
    'channels': ('metadata', 'memberIds'),
}


def embeds_of(path: str) -> dict[str, tuple[str, str]]:
    """Embedded reference name -> (id field, target family path) for a family."""
    refs = BY_PATH[path].references
    return {name: refs[name] for name in EMBEDS.get(path, ())}


for _path, _names in EMBEDS.items():   # a declaration that names no reference fails at import
    for _name in _names:
        if _name not in BY_PATH[_path].references:
            raise ValueError(f'{_path}: {_name!r} is not a reference of the family')
