"""Sample files and request bodies that the tests of one format or feature share across tiers."""
