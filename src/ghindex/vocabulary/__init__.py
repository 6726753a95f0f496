"""The names ghindex's data is spoken in, imported by every stage.

Each vocabulary is defined once, here, and fetching, storing, building, querying and
serving import it instead of spelling it again:

- `handles`: making and reading handles, the durable names of items;
- `edges`: the kinds of link in the reference graph, strongest first, with their meaning;
- `types`: document types, entity types and the types a search can be narrowed to;
- `tables`: the tables and views of the state database;
- `limits`: how big a request may be, checked by every door before work starts.
- `tokens`: what a text costs a language model's context, the one estimate answers are
  sized by;
- `hidden`: the characters that render as nothing, which every door removes or shows.

These modules import nothing else from ghindex but `errors`, so any stage can use them.
"""
