package main
/*@CALIB_FUNCTION@*/
