"""Generic Beam transforms shared by every pipeline job."""
