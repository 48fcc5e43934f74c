"""The schema's migration scripts as data, one module per version range.

``brain.store.schema`` puts them in order (``MIGRATIONS``) and applies them; this
package holds only SQL text. Each module says where it is tested.
"""
